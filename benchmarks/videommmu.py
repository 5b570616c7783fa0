"""Video-MMMU adapter: subject and discipline folder from the id, the Adaptation image."""

from __future__ import annotations

from typing import Any

# Video-MMMU's 30 subjects in its six disciplines; the release stores each discipline's
# videos in a folder of that name (as the benchmark's own loader and lmms-eval do).
DISCIPLINES = {
    "Art": ["Art", "Art_Theory", "Design", "Music"],
    "Science": ["Biology", "Chemistry", "Geography", "Math", "Physics"],
    "Humanities": ["History", "Literature", "Sociology", "Psychology"],
    "Engineering": [
        "Agriculture",
        "Architecture_and_Engineering",
        "Computer_Science",
        "Electronics",
        "Energy_and_Power",
        "Materials",
        "Mechanical_Engineering",
    ],
    "Medicine": [
        "Basic_Medical_Science",
        "Clinical_Medicine",
        "Diagnostics_and_Laboratory_Medicine",
        "Pharmacy",
        "Public_Health",
    ],
    "Business": ["Accounting", "Economics", "Finance", "Manage", "Marketing"],
}
_DISCIPLINE_OF = {s: d for d, subjects in DISCIPLINES.items() for s in subjects}


def row(r: dict[str, Any]) -> dict[str, Any]:
    """Add ``subject``, ``discipline`` and, on the Adaptation track, ``image_file``.

    Ids read ``<split>_<Subject>_<n>`` (``validation_Art_Theory_3``): the subject is what
    lies between the first and the last underscore.
    """
    parts = str(r["id"]).split("_")
    subject = "_".join(parts[1:-1])
    if len(parts) < 3 or subject not in _DISCIPLINE_OF:
        raise ValueError(f"id {r['id']!r} does not name a known subject")
    out = {**r, "subject": subject, "discipline": _DISCIPLINE_OF[subject]}
    # The Adaptation question's image is shown after the video (paper Sec. 3.1).
    out["image_file"] = f"{r['id']}.png" if r.get("track") == "Adaptation" else ""
    return out
