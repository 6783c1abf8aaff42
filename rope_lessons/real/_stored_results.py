"""A stored result of the pretrained model that is made one item at a time.

Chapter 9's long-context sweep (:mod:`rope_lessons.real.pretrained_sweep`) and its
ablations (:mod:`rope_lessons.real.pretrained_ablations`) each keep one results file
(``rope_lessons/results/<name>.json``) that holds the definition of the result, the
sessions that made it and one entry per item (a forward pass, a window of text). The
file is written atomically after every item, so a run resumes where the last one
stopped; it is read back only if it matches its hash and the current definition.

:class:`ResumableResults` holds what the two differ in (file name, module, definition,
words of the messages) and does the rest: read and check the file, run what is missing,
parse the command line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch
from tqdm import tqdm

from rope_lessons.evidence.store import (
    content_hash,
    record,
    results_path,
    without_paths,
    write_results,
)
from rope_lessons.evidence.sweep import same_config

Item = TypeVar("Item")


class Runs(Protocol):
    """A module's ``run``: what its command line calls."""

    def __call__(
        self,
        *,
        device: str,
        restart: bool,
        results_dir: Path | None,
        command: str,
        limit: int | None,
    ) -> Path: ...


@dataclass(frozen=True)
class ResumableResults:
    """One stored result, made item by item.

    Attributes:
        name: the results file's name, without ``.json``.
        module: the module that makes it (``python -m <module>``).
        definition: everything that decides the results; a stored file made under
            another definition is refused (compared with
            :func:`rope_lessons.evidence.sweep.same_config`).
        what: what the messages call the result (``"sweep"``, ``"result"``).
        noun: what they call its items, plural (``"tasks"``, ``"windows"``).
        unit: the progress bar's unit (``"pass"``, ``"window"``).
    """

    name: str
    module: str
    definition: Callable[[], dict[str, Any]]
    what: str
    noun: str
    unit: str

    @property
    def command(self) -> str:
        """The command that makes the result."""
        return f"python -m {self.module}"

    def read_checked(self, path: Path, hint: str = "") -> dict[str, Any]:
        """The results file's content, refused (with ``hint`` appended to the message) if it
        does not match its hash or was made by another definition."""
        content: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        if content.get("sha256") != content_hash(content):
            raise ValueError(f"{path} does not match its sha256{hint}")
        if not same_config(content["definition"], self.definition()):
            raise ValueError(f"{path} was made by another definition of the {self.what}{hint}")
        return content

    def load(self, results_dir: Path | None = None) -> dict[str, Any]:
        """The stored file's checked content (the package's ``results`` by default)."""
        path = results_path(self.name, results_dir)
        if not path.is_file():
            raise FileNotFoundError(f"no stored results at {path}: run {self.command}")
        return self.read_checked(path)

    def resume(
        self,
        items: Mapping[str, Item],
        start: Callable[[torch.device], Callable[[Item], dict[str, Any]]],
        *,
        device: str,
        restart: bool,
        results_dir: Path | None,
        command: str,
        limit: int | None,
    ) -> Path:
        """Run every item missing from the file, writing it after each one.

        Args:
            items: every item of the result, under the key it is stored under, in the
                order they are run.
            start: called once on the device, if something is missing: it loads what the
                items need and returns the function that runs one item (its values).
            device: where the model runs (``"cpu"``, ``"cuda"``, ...).
            restart: discard stored results (needed when the definition changed).
            results_dir: where the file goes (the package's ``results`` by default).
            command: the command line recorded with the results.
            limit: stop after this many items (for a quick check).
        """
        path = results_path(self.name, results_dir)
        content: dict[str, Any] = {
            "name": self.name,
            "definition": self.definition(),
            "sessions": [],
            "results": {},
        }
        if path.is_file() and not restart:
            content = self.read_checked(path, "; rerun with --restart")
        pending = [key for key in items if key not in content["results"]]
        if limit is not None:
            pending = pending[:limit]
        if not pending:
            print(f"{self.name}: complete ({len(content['results'])} {self.noun}) in {path}")
            return path
        run_item = start(torch.device(device))
        content["sessions"].append(record(torch.device(device), command))
        session = len(content["sessions"]) - 1
        for key in tqdm(pending, desc=self.name, unit=self.unit, mininterval=1.0):
            begin = time.perf_counter()
            values = run_item(items[key])
            values |= {"seconds": round(time.perf_counter() - begin, 1), "session": session}
            content["results"][key] = values
            write_results(path, content)
        print(f"wrote {path} ({len(content['results'])} of {len(items)} {self.noun})")
        return path

    def main(
        self, argv: Sequence[str] | None, run: Runs, *, description: str, limit_help: str
    ) -> None:
        """The command line: parse ``argv`` (``sys.argv[1:]`` if None) and call ``run``,
        recording the command with any folder written ``DIR``."""
        parser = argparse.ArgumentParser(prog=self.command, description=description)
        parser.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:1, ...")
        parser.add_argument("--restart", action="store_true", help="discard stored results")
        parser.add_argument("--results-dir", type=Path, help="write here instead of the package")
        parser.add_argument("--limit", type=int, help=limit_help)
        args = parser.parse_args(argv)
        arguments = without_paths(list(argv) if argv is not None else sys.argv[1:])
        run(
            device=args.device,
            restart=args.restart,
            results_dir=args.results_dir,
            command=" ".join([self.command, *arguments]),
            limit=args.limit,
        )
