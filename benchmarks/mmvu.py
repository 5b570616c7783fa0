"""MMVU adapter: video path from the release's download URL, discipline from the subject."""

from __future__ import annotations

from typing import Any

# The 27 subjects grouped into MMVU's four disciplines (paper Sec. 2; the same grouping
# is used by lmms-eval's per-discipline accuracy).
DISCIPLINES = {
    "Science": [
        "Biology",
        "Chemistry",
        "Modern_Physics",
        "Astronomy",
        "Geography",
        "Materials_Science",
        "Neurobiology",
        "Electromagnetism",
        "Thermodynamics",
        "Mechanics",
    ],
    "Engineering": [
        "Civil_Engineering",
        "Electrical_Engineering",
        "Mechanical_Engineering",
        "Biomedical_Engineering",
        "Electronics_and_Communication",
        "Computer_Science",
    ],
    "Healthcare": [
        "Clinical_Medicine",
        "Basic_Medicine",
        "Preventive_Medicine",
        "Pharmacy",
        "Dentistry",
    ],
    "Humanities_and_Social_Science": [
        "Art",
        "Literature",
        "History",
        "Law",
        "Economics",
        "Management",
    ],
}
_DISCIPLINE_OF = {s: d for d, subjects in DISCIPLINES.items() for s in subjects}
_MARK = "/resolve/main/"


def row(r: dict[str, Any]) -> dict[str, Any]:
    """Add ``video_file`` (path inside the release) and ``discipline``."""
    url = str(r["video"])
    if _MARK not in url:
        raise ValueError(f"video URL {url!r} has no {_MARK!r} part to map to a local file")
    subject = str(r["metadata"]["subject"])
    if subject not in _DISCIPLINE_OF:
        raise ValueError(f"unknown subject {subject!r}")
    return {
        **r,
        "video_file": url.split(_MARK, 1)[1],
        "subject": subject,
        "discipline": _DISCIPLINE_OF[subject],
    }


def mc_row(r: dict[str, Any]) -> dict[str, Any] | None:
    """Like :func:`row`, keeping multiple-choice questions only (the "MMVU (mc)" subset)."""
    return row(r) if r.get("question_type") == "multiple-choice" else None
