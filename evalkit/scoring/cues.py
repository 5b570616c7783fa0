"""The words around an option that decide what a reply does with it.

A reply concludes on an option ("the best option is A", "Therefore, option B is the most
accurate", "most likely B", "C is correct"), rules it out ("this rules out option A", "A
is wrong", "not B"), lists it with others ("A and C"), or refuses to pick ("I cannot
determine ..."). ``evalkit.scoring.options`` reads the text before a mention (PRE) and
after it (POST) with these patterns. English and Chinese.
"""

from __future__ import annotations

import re

# A clause ends at sentence punctuation or a contrast ("..., but B").
BREAK = re.compile(
    r"[.;!?。；,，](?:\s|$)|[\n;。；]|\b(?:but|however|whereas|while|although|though|yet)\b", re.I
)
NEG_PRE = re.compile(
    r"\b(?:not|never|neither|nor|no\s+longer|rules?\s+out|ruled\s+out|ruling\s+out|eliminat\w*"
    r"|exclud\w*|rather\s+than|instead\s+of|unlike|incorrect|wrong|cannot|against|except)\b"
    r"|n't\b|不是|排除|而非",
    re.I,
)
ASIDE = r"\s*[)\]]?\s*(?:\([^)\n]{0,60}\)\s*)?"  # "Option A (sunny) is unlikely"
NEG_POST = re.compile(
    ASIDE + r"(?:"
    r"(?:is|are|was|seems|appears|would\s+be|can\s+be|could\s+be|must\s+be|should\s+be)?\s*"
    r"(?:also\s+|clearly\s+|definitely\s+|thus\s+|therefore\s+)?"
    r"(?:wrong|incorrect|inaccurate|false\b|unlikely|impossible|ruled\s+out|eliminated|excluded"
    r"|invalid|out\s+of\s+the\s+question)"
    r"|(?:is|was|seems)?\s*(?:not|n't)\s+(?:correct|right|accurate|true|possible|valid|likely"
    r"|the\s+(?:correct|right|best|answer|case)|an?\s+(?:option|match)|supported|consistent|it\b)"
    r"|(?:does\s+not|doesn't|did\s+not|didn't)\s+(?:match|fit|show|describe|happen|apply|align)"
    r"|(?:cannot|can't|can\s+not)\s+be\b|fails\b|contradicts\b"
    r"|是错|错误|不正确|不对|不符合|可以排除)",
    re.I,
)
POS_PRE = re.compile(
    r"(?:\b(?:answer|option|choice|caption|sentence|pick|guess|selection|match|one)\s+"
    r"(?:here\s+|then\s+|therefore\s+)?(?:is|would\s+be|should\s+be|will\s+be|must\s+be"
    r"|seems\s+to\s+be|appears\s+to\s+be)\s*[:=]?"
    r"|\banswer\s*[:=]"
    r"|\b(?:i|we)(?:'d|'ll|\s+would|\s+will|\s+should|\s+must|\s+can)?\s+(?:choose|select|pick"
    r"|go\s+with|opt\s+for|guess|say|answer|think|believe)(?:\s+(?:that|it(?:'s|\s+is)"
    r"|the\s+answer\s+is))?"
    r"|\b(?:therefore|thus|hence|so|consequently|accordingly|in\s+conclusion|in\s+summary"
    r"|to\s+conclude|overall|finally|ultimately)\s*[,:]?(?:\s*(?:it|this)(?:'s|\s+is"
    r"|\s+must\s+be|\s+should\s+be))?"
    r"|\bi\.\s*e\.\s*,?|\bthat\s+is\s*,|\bnamely\s*,?"
    r"|\bif\s+(?:i\s+(?:had|have|must)\s+to|forced\s+to)\s+(?:choose|pick|guess|answer|select)\s*,?"
    r"|\b(?:most\s+likely|likely|probably|presumably|definitely|clearly)\s*[,:]?"
    r"(?:\s*(?:it|this)(?:'s|\s+is))?"
    r"|答案(?:应该)?(?:是|为|选)?\s*[:：]?|应该?选(?:择)?|我选(?:择)?|选择)\s*(?:the\s+)?$",
    re.I,
)
POS_POST = re.compile(
    ASIDE + r"(?:"
    r"(?:is|seems|appears|would\s+be|must\s+be|should\s+be|remains)\s+(?:to\s+be\s+)?"
    r"(?:the\s+|also\s+|clearly\s+|indeed\s+|definitely\s+)*"
    r"(?:correct|right\b|best|(?:more|most)\s+(?:accurate|appropriate|likely|plausible|reasonable"
    r"|suitable|fitting|consistent)|answer\b|accurate|true\b|the\s+one\b|a\s+match|consistent)"
    r"|(?:best|correctly|accurately|perfectly|exactly)\s+(?:describes|matches|fits|captures"
    r"|reflects|answers|depicts)"
    r"|(?:matches|fits)\s+(?:the\s+)?(?:video|description|best|perfectly|exactly|what)"
    r"|是正确|正确|最符合|最准确|符合)",
    re.I,
)
# "A and C", "A or B", "A/B": a set of letters, not a choice of one.
JOINED = re.compile(
    r"\s*[)\]]?\s*(?:,|and\b|or\b|&|/|和|或)\s*(?:(?i:option|choice)\s*)?[(\[]?[A-Z](?![A-Za-z])"
)
LINE_NEG = re.compile(
    r"\b(?:incorrect|not|no|wrong|false|inaccurate|inconsistent|unlikely|contradicts)\b"
    r"|n't\b|✗|❌",
    re.I,
)
LINE_POS = re.compile(r"\b(?:correct|right|matches|true|accurate|consistent|best)\b|✓|✅", re.I)
REFUSAL = re.compile(
    r"\b(?:cannot|can't|can\s+not|unable\s+to|not\s+able\s+to|impossible\s+to|not\s+possible\s+to)"
    r"\s+(?:be\s+)?(?:determine|determined|tell|answer|say|know|identify|see|view|watch|access"
    r"|infer|confirm|decide|select|choose)"
    r"|\bnone\s+of\s+the\s+(?:options|choices|above|given|provided|answers|captions)"
    r"|\bno\s+(?:option|choice|answer)\s+(?:is|fits|matches)"
    r"|\b(?:i'm|i\s+am)\s+sorry|\bi\s+apologi[sz]e"
    r"|\bnot\s+enough\s+(?:information|context|detail)|\binsufficient\s+(?:information|evidence)"
    r"|\bdon't\s+have\s+(?:access|enough)|无法(?:确定|判断|回答)|不确定",
    re.I,
)

# "... a dog or a cat": an alternative named, not a conclusion
ALTERNATIVE = re.compile(r"\s*(?:,\s*)?(?:or|nor|and)\b|\s*/")
# "it is evening", "the last to leave is the green car": the option a sentence concludes on
IT_IS = re.compile(r"\b(?:is|was|'s|must\s+be|would\s+be)\s+(?:an?\s+|the\s+)?$", re.I)

# "either B or C", "A or B", "A/B": two letters named as alternatives (a hedge), and "both
# A and B are possible": a reply that says so commits to neither, nor to any option text
HEDGE_OR = re.compile(
    r"\s*[)\]]?\s*(?:,\s*)?(?:or\b|/|或)\s*(?:(?i:option|choice)\s*)?[(\[]?[A-Z](?![A-Za-z])"
)
BOTH = re.compile(r"\bboth\s+(?:(?:of\s+)?(?:the\s+)?(?:options?|choices?)\s+)?[(\[]?$", re.I)
