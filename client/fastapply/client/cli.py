"""``fastapply apply FILE SNIPPET``: merge an edit snippet into a file through a server.

``-`` as FILE or SNIPPET reads standard input. The merged file goes to standard output,
to ``-o OUT``, or back into FILE with ``--in-place``; files are written atomically (a
temporary file in the same folder, then ``os.replace``), keeping FILE's mode (and owner,
where the user may set it), so a failed request or an interrupted write never leaves a
half-written file. A symbolic link is written through: its target gets the merge and
the link stays. (Like any atomic save, the file gets a new inode: other hard links to
it keep the old text.) A UTF-8 byte order mark is not sent to the server and is kept
in what is written. On an error the server's message is printed and the exit status is
1; nothing is written. ``--in-place`` also writes nothing if FILE changed on disk while
the merge ran (an editor saved it, or another apply wrote it): that change is kept and
the merge, made from the older text, is refused. Ctrl-C stops the request with exit
status 130, writing nothing.

Only a complete merge is ever written: a file the model did not finish (``--max-tokens``
or the context ran out) is an error, and so is a snippet the deterministic merge was
unsure of (the server names the places). With ``--stream`` to standard output the text
already printed before such an error is a fragment; the error says so.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from pathlib import Path

DEFAULT_URL = "127.0.0.1:8001"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from fastapply.server.processes import positive

    p.add_argument("file", help="the file to edit ('-': standard input)")
    p.add_argument("snippet", help="the edit snippet: lazy markers, SEARCH/REPLACE blocks "
                                   "or a unified diff ('-': standard input)")
    p.add_argument("--url", default=os.environ.get("FASTAPPLY_URL", DEFAULT_URL),
                   help="the server's gRPC address HOST:PORT (default: $FASTAPPLY_URL or "
                        f"{DEFAULT_URL})")
    p.add_argument("--api-key", help="the server's API key (default: $FASTAPPLY_API_KEY; "
                                      "prefer the variable: an option shows in ps)")
    p.add_argument("--instruction", help="what the edit is for (used by morph prompts)")
    p.add_argument("--max-tokens", type=int,
                   help="output token budget; a file not finished within it is an error, "
                        "never written (default: the room the model's context leaves)")
    p.add_argument("--stream", action="store_true",
                   help="print the merged file as it is produced (standard output only)")
    p.add_argument("--timeout-s", type=positive(float), default=300.0,
                   help="give up after this many seconds (default 300)")
    p.add_argument("--stats", action="store_true", help="print the request's figures to stderr")
    where = p.add_mutually_exclusive_group()
    where.add_argument("-o", "--output", type=Path, help="write the merged file here")
    where.add_argument("--in-place", action="store_true", help="replace FILE atomically")


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same folder + ``os.replace``.

    An existing file keeps its mode; a new one gets the umask's default (not the
    temporary file's 0600). On any failure the temporary file is removed and ``path``
    is untouched.
    """
    path = path.resolve()  # through a symbolic link: its target is the file to replace
    st = path.stat() if path.exists() else None
    mode = st.st_mode & 0o7777 if st is not None else _default_mode()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if st is not None and (st.st_uid, st.st_gid) != (os.getuid(), os.getgid()):
            with contextlib.suppress(OSError):  # only root (or the group's member) may
                os.chown(tmp, st.st_uid, st.st_gid)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _not_written(args: argparse.Namespace, printed: bool = False) -> str:
    """What an error left alone (or ``printed`` already), for its message."""
    if args.in_place:
        return f"\n{args.file} is unchanged"
    if args.output is not None:
        return f"\n{args.output} was not written"
    if printed:
        return "\nthe text printed above is a fragment, not the merged file"
    return ""


BOM = "\ufeff"


def _read(name: str, stdin_used: list[bool]) -> str:
    if name == "-":
        if stdin_used[0]:
            raise ValueError("only one of FILE and SNIPPET can be '-' (standard input)")
        stdin_used[0] = True
        return sys.stdin.read()
    try:
        with open(name, encoding="utf-8", newline="") as fh:
            return fh.read()
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{name} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
            f"{exc.start}); fastapply edits UTF-8 text files: convert it first (for "
            f"instance iconv -f latin1 -t utf-8), or send only the text part") from None


def _changed(name: str, before: str) -> bool:
    """Whether file ``name`` no longer holds ``before`` (unreadable or not UTF-8 counts)."""
    try:
        return _read(name, [True]) != before
    except (OSError, ValueError):
        return True


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except KeyboardInterrupt:
        print(f"fastapply apply: interrupted{_not_written(args)}", file=sys.stderr)
        return 130


def _run(args: argparse.Namespace) -> int:
    from fastapply.client.grpc import FastApplyClient, FastApplyError

    if args.in_place and args.file == "-":
        print("fastapply apply: --in-place needs a FILE, not standard input", file=sys.stderr)
        return 2
    stdin_used = [False]
    try:
        original = _read(args.file, stdin_used)
        snippet = _read(args.snippet, stdin_used)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        print(f"fastapply apply: {exc}", file=sys.stderr)
        return 2
    bom = BOM if original.startswith(BOM) else ""  # kept in the file, not sent
    original = original[len(bom):]
    to_stdout = args.output is None and not args.in_place
    printed = False  # text streamed to standard output already
    try:
        with FastApplyClient(args.url, timeout_s=args.timeout_s, api_key=args.api_key) as client:
            if args.stream:
                stream = client.stream(original, snippet, args.instruction, args.max_tokens)
                for delta in stream:
                    if to_stdout:
                        sys.stdout.write(delta if printed else bom + delta)
                        sys.stdout.flush()
                        printed = True
                merged, stats = stream.merged_code, stream.stats
            else:
                result = client.apply(original, snippet, args.instruction, args.max_tokens)
                merged, stats = result.merged_code, result.stats
    except FastApplyError as exc:
        print(f"fastapply apply: {exc}{_not_written(args, printed)}", file=sys.stderr)
        return 1
    if stats is None or not stats.complete:  # the client refuses these; never write one
        reason = stats.finish_reason if stats is not None else "no statistics"
        print(f"fastapply apply: the server's answer is not a complete merge ({reason})"
              f"{_not_written(args, printed)}", file=sys.stderr)
        return 1
    if to_stdout and not args.stream:
        sys.stdout.write(bom + merged)
    elif not to_stdout:
        target = Path(args.file) if args.in_place else args.output
        try:
            if args.in_place and _changed(args.file, bom + original):
                print(f"fastapply apply: {target} changed on disk while the merge ran, so "
                      f"the merge (made from the text read before) is not written; "
                      f"{target} keeps its new text: run the edit again on it",
                      file=sys.stderr)
                return 1
            write_atomically(target, bom + merged)
        except OSError as exc:
            print(f"fastapply apply: the merge is complete but could not be written to "
                  f"{target}: {exc.strerror or exc}{_not_written(args)}", file=sys.stderr)
            return 1
    if args.stats and stats is not None:
        print(" ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}"
                       for k, v in stats.to_dict().items()), file=sys.stderr)
    return 0
