"""``evalkit score`` reads foreign prediction files safely: a file that is not what it
claims (bad encoding, a lone surrogate, an unbalanced quote, nesting no parser follows, a
broken or oversized spreadsheet, a FIFO or device, an empty file, NaN for a reply) is one
line naming the file, the line or row and what is wrong, exit 2, and no run directory.

Each case was a traceback, a half-written run or a silent wrong result before (issue 36).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from evalkit.cli.main import main
from tests.fixtures.bench import official

GOOD = {"id": "001-1", "prediction": "A"}
HEADER = "index\tvideo\tquestion\tanswer\tprediction\n"


@pytest.fixture
def data_root(tmp_path: Path) -> Path:
    official.videomme(tmp_path / "data" / "Video-MME")
    shutil.rmtree(tmp_path / "data" / "Video-MME" / "data")  # annotations only
    return tmp_path / "data"


def _jsonl(tmp: Path, second: str) -> Path:
    path = tmp / "p.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + second + "\n")
    return path


def _bytes(name: str, data: bytes) -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        (tmp / name).write_bytes(data)
        return tmp / name

    return build


def _sheet(tmp: Path) -> bytes:
    frame = pd.DataFrame([{"index": 0, "video": "vidA", "question": "Q?", "prediction": "A"}])
    buf = io.BytesIO()
    frame.to_excel(buf, index=False)
    return buf.getvalue()


def _truncated_xlsx(tmp: Path) -> Path:
    data = _sheet(tmp)
    (tmp / "p.xlsx").write_bytes(data[: len(data) // 2])
    return tmp / "p.xlsx"


def _zip_without_workbook(tmp: Path) -> Path:
    with zipfile.ZipFile(tmp / "p.xlsx", "w") as zf:
        zf.writestr("notes.txt", "not a workbook")
    return tmp / "p.xlsx"


def _fifo(tmp: Path) -> Path:
    os.mkfifo(tmp / "p.jsonl")
    return tmp / "p.jsonl"


def _loop(tmp: Path) -> Path:
    (tmp / "p.jsonl").symlink_to(tmp / "p.jsonl")
    return tmp / "p.jsonl"


def _dangling(tmp: Path) -> Path:
    (tmp / "p.jsonl").symlink_to(tmp / "gone.jsonl")
    return tmp / "p.jsonl"


def _folder(tmp: Path) -> Path:
    (tmp / "p.jsonl").mkdir()
    return tmp / "p.jsonl"


DEEP = '{"id": "001-2", "prediction": ' + "[" * 100_000 + "]" * 100_000 + "}"
# each reply opens a quote it never closes: pandas merged the rows in pairs, silently
UNBALANCED = HEADER + "".join(
    f'{i}\tvid\tQuestion {qid}?\tA\t"The answer is A\n'
    for i, qid in enumerate(["001-1", "001-2", "002-1", "002-2"])
)
CASES: list[tuple[str, Callable[[Path], Path], str]] = [
    ("tsv not utf-8", _bytes("p.tsv", HEADER.encode() + b"0\tv\tq\tA\t\xff\n"), "p.tsv, line 2:"),
    ("jsonl not utf-8", _bytes("p.jsonl", b'{"id": "001-1", "prediction": "\xe9"}\n'), "line 1:"),
    (
        "lone surrogate",
        lambda t: _jsonl(t, '{"id": "001-2", "prediction": "B \\ud800"}'),
        "p.jsonl:2: field 'prediction' holds a lone surrogate",
    ),
    (
        "lone surrogate in a key",
        lambda t: _jsonl(t, '{"id": "\\udfff", "prediction": "B"}'),
        "p.jsonl:2: field 'id' holds a lone surrogate",
    ),
    ("unbalanced quote", _bytes("p.tsv", UNBALANCED.encode()), "unbalanced quote"),
    ("deep nesting", lambda t: _jsonl(t, DEEP), "p.jsonl:2: nested too deeply"),
    ("truncated xlsx", _truncated_xlsx, "not an .xlsx workbook"),
    ("text named xlsx", _bytes("p.xlsx", b"index\tprediction\n0\tA\n"), "not an .xlsx workbook"),
    ("zip without a workbook", _zip_without_workbook, "not an .xlsx workbook"),
    ("fifo", _fifo, "p.jsonl: a FIFO (named pipe), not a regular file"),
    ("device", lambda t: Path("/dev/zero"), "/dev/zero: a character device, not a regular file"),
    ("symlink loop", _loop, "p.jsonl: a symlink loop"),
    ("dangling symlink", _dangling, "p.jsonl: a symlink to a missing file"),
    ("folder", _folder, "p.jsonl: a folder, not a predictions file"),
    ("empty", _bytes("p.jsonl", b""), "p.jsonl: the file is empty"),
    ("blank lines only", _bytes("p.jsonl", b"\n  \n\n"), "p.jsonl: no prediction rows"),
    (
        "NaN reply",
        lambda t: _jsonl(t, '{"id": "001-2", "prediction": NaN}'),
        "p.jsonl:2: the reply is NaN",
    ),
    (
        "Infinity reply",
        lambda t: _jsonl(t, '{"id": "001-2", "prediction": 1e999}'),
        "p.jsonl:2: the reply is inf",
    ),
]


@pytest.mark.parametrize(("case", "build", "message"), CASES, ids=[c[0] for c in CASES])
def test_a_malformed_predictions_file_is_one_line_exit_2_and_no_run(
    tmp_path: Path,
    data_root: Path,
    capsys: pytest.CaptureFixture[str],
    case: str,
    build: Callable[[Path], Path],
    message: str,
) -> None:
    preds = build(tmp_path)
    runs = tmp_path / "runs"
    argv = ["score", "--bench", "Video-MME", "--data-root", str(data_root)]
    argv += ["--predictions", str(preds), "--runs-dir", str(runs), "--run-id", "x"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("evalkit score: error: "), err
    assert message in err
    assert not runs.exists()  # nothing written, not even an empty run directory


def _zip_bomb(path: Path, unpacked_mib: int) -> None:
    """A real .xlsx whose sheet unpacks to ``unpacked_mib`` MiB of valid rows (each of
    1,000 characters), deflated to a few MiB."""
    buf = io.BytesIO()
    pd.DataFrame([{"index": 0, "question": "q", "prediction": "A"}]).to_excel(buf, index=False)
    with zipfile.ZipFile(buf) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            data = src.read(info)
            if not info.filename.endswith("sheet1.xml"):
                out.writestr(info, data)
                continue
            head = data.decode().split("<sheetData>")[0] + "<sheetData>"
            tail = "</sheetData>" + data.decode().split("</sheetData>")[1]
            row = '<row><c t="inlineStr"><is><t>' + "A" * 1000 + "</t></is></c></row>"
            chunk = (row * 1000).encode()
            with out.open(info.filename, "w", force_zip64=True) as f:
                f.write(head.encode())
                for _ in range(unpacked_mib * 2**20 // len(chunk)):
                    f.write(chunk)
                f.write(tail.encode())


def test_an_xlsx_zip_bomb_is_refused_within_a_memory_bound(tmp_path: Path, data_root: Path) -> None:
    pytest.importorskip("openpyxl")
    bomb = tmp_path / "bomb.xlsx"
    _zip_bomb(bomb, 1024)
    assert bomb.stat().st_size < 16 * 2**20  # a small file ...
    # ... that must be refused by a process that may not map more than 2 GiB
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))"
    code = f"{limit}; from evalkit.cli.main import main; raise SystemExit(main())"
    argv = ["score", "--bench", "Video-MME", "--data-root", str(data_root)]
    argv += ["--predictions", str(bomb), "--runs-dir", str(tmp_path / "runs")]
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "bomb.xlsx: unpacks to 1023 MiB, over the 256 MiB" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "runs").exists()


LONG = 'Let me think.\tThe clip shows "two" cups,\nthen one. ' * 200 + "Answer: B"


def _long_evalkit(tmp: Path) -> Path:
    return _jsonl(tmp, json.dumps({"id": "001-2", "prediction": LONG}))


def _long_lmms_eval(tmp: Path) -> Path:
    rows = [
        {"doc_id": i, "doc": {"question_id": q}, "filtered_resps": [r]}
        for i, (q, r) in enumerate([("001-1", "A"), ("001-2", LONG)])
    ]
    (tmp / "s.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp / "s.jsonl"


def _long_tsv(tmp: Path) -> Path:
    frame = pd.DataFrame(
        [{"question_id": "001-1", "prediction": "A"}, {"question_id": "001-2", "prediction": LONG}]
    )
    frame.to_csv(tmp / "p.tsv", sep="\t", index=False)  # the long cell quoted, as VLMEvalKit's
    return tmp / "p.tsv"


@pytest.mark.parametrize("build", [_long_evalkit, _long_lmms_eval, _long_tsv])
def test_a_long_reply_is_not_kept_but_read_again_when_scored(
    tmp_path: Path, build: Callable[[Path], Path]
) -> None:
    from evalkit.predictions import Again, read_matched

    keys = {sid: [{"question_id": sid}] for sid in ("001-1", "001-2")}
    matched = read_matched(build(tmp_path), ["001-1", "001-2"], keys)
    assert isinstance(matched.texts["001-2"], Again) and matched.texts["001-1"] == "A"
    assert matched.reply("001-2") == LONG


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "p.jsonl",
            json.dumps(GOOD) + "\n" + json.dumps({"id": "001-2", "prediction": "B" * 5000}),
            "p.jsonl, line 2: longer than",
        ),
        (
            "p.json",
            json.dumps({"vid": {"dim": [{"question": "q", "prediction": "B" * 5000}]}}),
            "p.json: a JSON document over",
        ),
    ],
)
def test_a_line_or_document_past_the_read_limit_is_refused_not_held(
    tmp_path: Path,
    data_root: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    text: str,
    message: str,
) -> None:
    import evalkit.foreign

    monkeypatch.setattr(evalkit.foreign, "MAX_LINE_BYTES", 4096)  # 64 MiB in use
    (tmp_path / name).write_text(text + "\n")
    argv = ["score", "--bench", "Video-MME", "--data-root", str(data_root)]
    argv += ["--predictions", str(tmp_path / name), "--runs-dir", str(tmp_path / "runs")]
    assert main(argv) == 2
    assert message in capsys.readouterr().err and not (tmp_path / "runs").exists()
