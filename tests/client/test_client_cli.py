"""``fastapply apply``: edits files on disk through a real server, atomically."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import reaped

from fastapply.cli import main

ORIGINAL = "def a():\n    return 1\n\n\ndef b():\n    return 2\n"
SNIPPET = "<<<<<<< SEARCH\n    return 1\n=======\n    return 10\n>>>>>>> REPLACE\n"
MERGED = "def a():\n    return 10\n\n\ndef b():\n    return 2\n"
UNMERGEABLE = "<<<<<<< SEARCH\nnot in the file\n=======\nx = 1\n>>>>>>> REPLACE\n"
#: A lazy snippet whose anchors match two places equally well: the merge is unsure.
AMBIGUOUS = "    return 2\n    return 3\n"
TWINS = "def a():\n    x = 1\n    return 2\n\n\ndef b():\n    x = 1\n    return 2\n"


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    source = tmp_path / "code.py"
    source.write_text(ORIGINAL)
    source.chmod(0o640)
    snippet = tmp_path / "edit.txt"
    snippet.write_text(SNIPPET)
    return source, snippet


@pytest.mark.server
def test_apply_prints_the_merged_file(det_server: Any, files: tuple[Path, Path],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    source, snippet = files
    assert main(["apply", str(source), str(snippet), "--url", det_server.grpc_url]) == 0
    assert capsys.readouterr().out == MERGED
    assert source.read_text() == ORIGINAL


@pytest.mark.server
def test_apply_streams_and_reads_the_snippet_from_stdin(
        det_server: Any, files: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    source, _ = files
    monkeypatch.setattr("sys.stdin", io.StringIO(SNIPPET))
    assert main(["apply", str(source), "-", "--stream", "--stats",
                 "--url", det_server.grpc_url]) == 0
    captured = capsys.readouterr()
    assert captured.out == MERGED
    assert "finish_reason=merged" in captured.err


@pytest.mark.server
def test_apply_writes_the_output_file(det_server: Any, files: tuple[Path, Path],
                                      tmp_path: Path) -> None:
    source, snippet = files
    out = tmp_path / "out" / "merged.py"
    out.parent.mkdir()
    assert main(["apply", str(source), str(snippet), "-o", str(out),
                 "--url", det_server.grpc_url]) == 0
    assert out.read_text() == MERGED
    assert out.stat().st_mode & 0o777 != 0o600  # not the temporary file's private mode


@pytest.mark.server
def test_in_place_replaces_the_file_and_keeps_its_mode(det_server: Any,
                                                        files: tuple[Path, Path]) -> None:
    source, snippet = files
    inode = source.stat().st_ino
    assert main(["apply", str(source), str(snippet), "--in-place",
                 "--url", det_server.grpc_url]) == 0
    assert source.read_text() == MERGED
    assert source.stat().st_mode & 0o777 == 0o640
    assert source.stat().st_ino != inode  # replaced by rename, not rewritten in place
    assert sorted(p.name for p in source.parent.iterdir()) == ["code.py", "edit.txt"]


@pytest.mark.server
def test_in_place_server_error_leaves_the_file_untouched(
        det_server: Any, files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    source, snippet = files
    snippet.write_text(UNMERGEABLE)
    before = source.stat()
    assert main(["apply", str(source), str(snippet), "--in-place",
                 "--url", det_server.grpc_url]) == 1
    assert "cannot be merged: SEARCH block 1" in capsys.readouterr().err
    assert source.read_text() == ORIGINAL
    assert source.stat().st_mtime_ns == before.st_mtime_ns
    assert sorted(p.name for p in source.parent.iterdir()) == ["code.py", "edit.txt"]


def test_unreachable_server_is_an_error_not_a_write(files: tuple[Path, Path],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from fastapply.server.processes import free_port

    source, snippet = files
    assert main(["apply", str(source), str(snippet), "--in-place",
                 "--url", f"127.0.0.1:{free_port()}"]) == 1
    assert "cannot reach a fastapply server" in capsys.readouterr().err
    assert source.read_text() == ORIGINAL


def test_failed_write_leaves_no_temporary_file(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapply.client.cli import write_atomically

    target = tmp_path / "code.py"
    target.write_text(ORIGINAL)

    def refuse(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        write_atomically(target, MERGED)
    assert target.read_text() == ORIGINAL
    assert [p.name for p in tmp_path.iterdir()] == ["code.py"]


def test_in_place_refuses_stdin(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["apply", "-", "edit.txt", "--in-place"]) == 2
    assert "--in-place needs a FILE" in capsys.readouterr().err


def unchanged(path: Path, before: os.stat_result) -> bool:
    return (path.stat().st_mtime_ns == before.st_mtime_ns and path.stat().st_ino ==
            before.st_ino and sorted(p.name for p in path.parent.iterdir()) == [
                "code.py", "edit.txt"])


@pytest.mark.server
@pytest.mark.slow
@pytest.mark.parametrize("stream", [False, True])
def test_in_place_never_writes_a_file_cut_at_max_tokens(
        tiny_server: Any, files: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
        stream: bool) -> None:
    source, snippet = files
    before = source.stat()
    assert main(["apply", str(source), str(snippet), "--in-place", "--max-tokens", "5",
                 *(["--stream"] if stream else []), "--url", tiny_server.grpc_url]) == 1
    err = capsys.readouterr().err
    assert "reached max_tokens=5 before it finished the file" in err
    assert f"{source} is unchanged" in err
    assert source.read_text() == ORIGINAL and unchanged(source, before)


@pytest.mark.server
@pytest.mark.slow
def test_streaming_a_cut_file_to_stdout_says_it_is_a_fragment(
        tiny_server: Any, files: tuple[Path, Path],
        capsys: pytest.CaptureFixture[str]) -> None:
    source, snippet = files
    assert main(["apply", str(source), str(snippet), "--stream", "--max-tokens", "5",
                 "--url", tiny_server.grpc_url]) == 1
    captured = capsys.readouterr()
    assert captured.out  # the deltas came before the refusal ...
    assert "the text printed above is a fragment, not the merged file" in captured.err


@pytest.mark.server
def test_in_place_never_writes_an_unsure_merge(
        det_server: Any, files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    source, snippet = files
    source.write_text(TWINS)
    snippet.write_text(AMBIGUOUS)
    before = source.stat()
    assert main(["apply", str(source), str(snippet), "--in-place",
                 "--url", det_server.grpc_url]) == 1
    err = capsys.readouterr().err
    assert "match equally well at lines 3 and 8" in err  # where it was unsure
    assert "keep a few unchanged lines around it" in err  # what to do
    assert source.read_text() == TWINS and unchanged(source, before)


@pytest.mark.server
def test_in_place_through_a_symlink_edits_the_target_and_keeps_the_link(
        det_server: Any, files: tuple[Path, Path]) -> None:
    source, snippet = files
    link = source.with_name("link.py")
    link.symlink_to(source.name)
    assert main(["apply", str(link), str(snippet), "--in-place",
                 "--url", det_server.grpc_url]) == 0
    assert link.is_symlink() and os.readlink(link) == source.name  # was a regular file
    assert source.read_text() == MERGED
    assert oct(source.stat().st_mode & 0o777) == oct(0o640)


@pytest.mark.server
def test_a_merge_that_cannot_be_written_is_an_error_not_a_traceback(
        det_server: Any, files: tuple[Path, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    source, snippet = files
    out = tmp_path / "missing-dir" / "out.py"
    assert main(["apply", str(source), str(snippet), "-o", str(out),
                 "--url", det_server.grpc_url]) == 1
    err = capsys.readouterr().err
    assert "could not be written" in err and "was not written" in err, err
    assert source.read_text() == ORIGINAL


@pytest.mark.server
def test_a_byte_order_mark_is_kept_and_not_sent(det_server: Any, files: tuple[Path, Path],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    source, snippet = files
    source.write_bytes(b"\xef\xbb\xbf" + ORIGINAL.encode())
    snippet.write_text("<<<<<<< SEARCH\ndef a():\n=======\ndef a(x):\n>>>>>>> REPLACE\n")
    assert main(["apply", str(source), str(snippet), "--in-place",
                 "--url", det_server.grpc_url]) == 0
    assert source.read_bytes() == b"\xef\xbb\xbf" + ORIGINAL.replace(
        "def a():", "def a(x):").encode()


def test_a_file_that_is_not_utf8_is_refused_with_what_to_do(
        files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    source, snippet = files
    source.write_bytes(b'x = "\xe9"\n')
    assert main(["apply", str(source), str(snippet), "--in-place"]) == 2
    err = capsys.readouterr().err
    assert "is not UTF-8 text (byte 0xe9 at offset 5)" in err and "iconv" in err, err
    assert source.read_bytes() == b'x = "\xe9"\n'


class _SnippetThatSavesFile(io.StringIO):
    """Standard input whose reading saves FILE first, as an editor would while the
    merge runs (FILE is read before the snippet)."""

    def __init__(self, path: Path, text: str) -> None:
        super().__init__(SNIPPET)
        self.path, self.text = path, text

    def read(self, size: int | None = -1) -> str:
        self.path.write_text(self.text)
        return super().read(size)


@pytest.mark.server
def test_in_place_keeps_a_change_saved_while_the_merge_ran(
        det_server: Any, files: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    source, _ = files
    saved = ORIGINAL + "\n\ndef c():\n    return 3\n"
    monkeypatch.setattr("sys.stdin", _SnippetThatSavesFile(source, saved))
    assert main(["apply", str(source), "-", "--in-place", "--url", det_server.grpc_url]) == 1
    err = capsys.readouterr().err
    assert "changed on disk while the merge ran" in err and "is unchanged" not in err
    assert source.read_text() == saved  # the user's save is kept, not overwritten
    assert sorted(p.name for p in source.parent.iterdir()) == ["code.py", "edit.txt"]


def test_ctrl_c_during_a_request_exits_130_and_writes_nothing(
        files: tuple[Path, Path]) -> None:
    """A server that accepts the connection and never answers; Ctrl-C (SIGINT) then
    ends the request with a message, not a traceback."""
    import signal
    import socket
    import subprocess
    import sys

    source, snippet = files
    before = source.stat()
    with socket.socket() as sink:
        sink.bind(("127.0.0.1", 0))
        sink.listen()
        sink.settimeout(60)
        port = sink.getsockname()[1]
        # Started as from a terminal: SIGINT at its default, even where this test runs in
        # a shell's background job (which starts with SIGINT ignored, and a child keeps
        # that: Python then installs no KeyboardInterrupt handler).
        proc = subprocess.Popen(
            [sys.executable, "-m", "fastapply", "apply", str(source), str(snippet),
             "--in-place", "--url", f"127.0.0.1:{port}"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        with reaped(proc):
            conn, _ = sink.accept()  # the client is in its request now
            with conn:
                proc.send_signal(signal.SIGINT)
                _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and f"{source} is unchanged" in err
    assert "Traceback" not in err
    assert unchanged(source, before)


@pytest.mark.parametrize("timeout_s", ["0", "-1", "nan", "inf"])
def test_a_timeout_that_is_not_a_positive_number_is_refused(files: tuple[Path, Path],
                                                            timeout_s: str) -> None:
    # inf crashed the client's watchdog thread (OverflowError traceback), -1 failed at once
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "fastapply", "apply", *map(str, files),
                           "--timeout-s", timeout_s], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "above 0" in done.stderr, done.stderr
