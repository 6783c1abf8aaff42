"""Publishing: the GitHub Actions workflow and the links from the book to its repository.

The workflow (.github/workflows/ci.yml) lints clean with actionlint and does what the
README's "Publishing a copy" says: the README's test command on every pull request and
push to main; on main, the book built from the notebooks' executions of that test and
deployed to GitHub Pages. _config.yml's repository URL and branch, from which Jupyter Book
makes the repository, issue and Colab buttons, are well formed, every Colab link opens a
notebook of the repository, and the files that the README's command for a fork rewrites
are all that name the repository. The Colab buttons of the built pages are checked in
tests/built_site/test_colab_links.py.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
import yaml
from built_site.site_pages import config, notebook_toc_files
from helpers import ROOT, repository_module

TASKS = repository_module("tasks", "tasks.py")
CI = TASKS.WORKFLOWS / "ci.yml"
README = (ROOT / "README.md").read_text(encoding="utf-8")
REPOSITORY = config()["repository"]
BRANCH: str = REPOSITORY["branch"]
ON_MAIN = f"github.event_name != 'pull_request' && github.ref == 'refs/heads/{BRANCH}'"


def _workflow(path: Path) -> dict[Any, Any]:
    """A workflow file as PyYAML reads it: string keys, but for `on`, which YAML 1.1 takes
    for true."""
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict), path
    return loaded


def _jobs() -> dict[str, dict[str, Any]]:
    jobs: dict[str, dict[str, Any]] = _workflow(CI)["jobs"]
    return jobs


def _steps(job: str) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = _jobs()[job]["steps"]
    return steps


def _uses(step: dict[str, Any], action: str) -> bool:
    """Whether ``step`` uses ``action`` (named without its version)."""
    return bool(step.get("uses", "").split("@")[0] == action)


def _step(job: str, action: str) -> dict[str, Any]:
    """The one step of ``job`` that uses ``action``."""
    (step,) = [s for s in _steps(job) if _uses(s, action)]
    return step


def _readme_command(name: str) -> str:
    """The README's command `python3 tasks.py NAME` (section "Two commands"), as written."""
    section = README.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block
    commands = [line.split("#", 1)[0].strip() for line in block.group(1).splitlines()]
    (command,) = [c for c in commands if c == f"python3 tasks.py {name}"]
    return command


def test_workflow_files_are_yaml_workflows() -> None:
    files = sorted(TASKS.WORKFLOWS.glob("*.y*ml"))
    assert files == sorted(TASKS.WORKFLOWS.glob("*.yml")), "tasks.py lints *.yml only"
    assert CI in files
    for path in files:
        workflow = _workflow(path)
        assert workflow["name"] and workflow["jobs"], path


def test_actionlint_passes_on_the_workflows_and_fails_on_a_broken_one(tmp_path: Path) -> None:
    if not TASKS.ACTIONLINT.exists():
        pytest.skip(f"actionlint is not installed at {TASKS.ACTIONLINT} (requirements.txt)")

    def actionlint(*paths: Path) -> subprocess.CompletedProcess[str]:
        command = [str(TASKS.ACTIONLINT), *map(str, paths)]
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True)

    linted = actionlint(*sorted(TASKS.WORKFLOWS.glob("*.yml")))
    assert linted.returncode == 0, linted.stdout + linted.stderr
    # The same workflow with a misspelt input of actions/checkout: a pass means something.
    broken = tmp_path / "ci.yml"
    text = CI.read_text(encoding="utf-8")
    assert "persist-credentials:" in text
    broken.write_text(text.replace("persist-credentials:", "persist-credential:"))
    failed = actionlint(broken)
    assert failed.returncode != 0 and "persist-credential" in failed.stdout


def test_ci_runs_on_pull_requests_and_on_the_books_branch() -> None:
    workflow = _workflow(CI)
    triggers = workflow[True]  # the key `on`
    assert set(triggers) == {"pull_request", "push", "workflow_dispatch"}
    assert triggers["pull_request"] is None  # every pull request, whatever its base
    assert triggers["push"] == {"branches": [BRANCH]}  # what _config.yml's buttons open
    assert workflow["permissions"] == {"contents": "read"}
    # A pull request's newer push cancels its older run; runs on main (deployments) queue.
    assert "github.ref" in workflow["concurrency"]["group"]
    cancel = workflow["concurrency"]["cancel-in-progress"]
    assert cancel == "${{ github.event_name == 'pull_request' }}"


def test_every_action_is_githubs_own_at_a_major_version() -> None:
    """Only GitHub's own actions, each by its major version tag, which GitHub moves to
    the latest compatible release."""
    for path in sorted(TASKS.WORKFLOWS.glob("*.yml")):
        for job in _workflow(path)["jobs"].values():
            for step in job["steps"]:
                if "uses" in step:
                    assert re.fullmatch(r"actions/[\w-]+(/[\w-]+)?@v\d+", step["uses"]), step


def test_the_test_job_runs_the_readmes_test_command() -> None:
    job = _jobs()["test"]
    assert "if" not in job and job["runs-on"].startswith("ubuntu-")
    runs = [step for step in job["steps"] if "run" in step]
    command = _readme_command("test")
    assert [step for step in runs if step["run"] == command and "if" not in step]
    # the Python that requirements.txt names
    stated = re.search(r"\(Python (3\.\d+)\)", (ROOT / "requirements.txt").read_text())
    assert stated
    assert _step("test", "actions/setup-python")["with"]["python-version"] == stated.group(1)


def test_the_environment_is_cached_under_what_tasks_py_installs_from() -> None:
    cached = _step("test", "actions/cache")["with"]
    assert cached["path"] == TASKS.VENV.relative_to(ROOT).as_posix()
    # the files of tasks.py's requirements stamp, and the exact Python the venv links to
    for name in ("requirements.txt", TASKS.WEIGHTS_REQUIREMENTS, "pyproject.toml"):
        assert f"'{name}'" in cached["key"]
    assert "steps.python.outputs.python-version" in cached["key"]
    # the book job restores that environment (tasks.py installs it again on a miss)
    restored = [s["with"] for s in _steps("book") if _uses(s, "actions/cache/restore")]
    assert {"path": cached["path"], "key": cached["key"]} in restored


def test_the_book_is_built_from_the_test_jobs_executions_and_deployed() -> None:
    jobs = _jobs()
    cache = TASKS.JUPYTER_CACHE.relative_to(ROOT).as_posix()
    saved = _step("test", "actions/cache/save")
    assert saved["if"] == ON_MAIN and saved["with"]["path"] == cache
    assert _steps("test").index(saved) > next(
        i for i, step in enumerate(_steps("test")) if step.get("run") == _readme_command("test")
    )
    book = jobs["book"]
    assert book["needs"] == "test" and book["if"] == ON_MAIN
    steps = _steps("book")
    restores = [s for s in steps if _uses(s, "actions/cache/restore")]
    (executions,) = [s for s in restores if s["with"]["path"] == cache]
    assert executions["with"]["key"] == saved["with"]["key"]
    assert executions["with"]["fail-on-cache-miss"] is True  # never executions of its own
    (build,) = [s for s in steps if s.get("run") == _readme_command("book")]
    upload = _step("book", "actions/upload-pages-artifact")
    assert upload["with"]["path"] == "_build/html"
    assert steps.index(executions) < steps.index(build) < steps.index(upload)

    deploy = jobs["deploy"]
    assert deploy["needs"] == "book"
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"
    (step,) = deploy["steps"]
    assert _uses(step, "actions/deploy-pages") and step["id"] == "deployment"
    assert deploy["environment"]["url"] == "${{ steps.deployment.outputs.page_url }}"


def _owner_and_name() -> tuple[str, str]:
    """_config.yml's repository as (owner, name), checked to be a plain GitHub URL."""
    url = REPOSITORY["url"]
    # GitHub's owners: letters, digits and inner hyphens; names: letters, digits, . - _.
    match = re.fullmatch(r"https://github\.com/([A-Za-z0-9](?:-?[A-Za-z0-9])*)/([\w.-]+)", url)
    assert match, f"repository.url {url!r} is not https://github.com/<owner>/<name>"
    owner, name = match.groups()
    assert not name.endswith(".git") and name not in (".", ".."), url
    return owner, name


def test_repository_url_and_branch_are_well_formed() -> None:
    _owner_and_name()
    # a plain branch name, as git check-ref-format allows it, and not a full ref
    assert re.fullmatch(r"[\w-]+(?:[./][\w-]+)*", BRANCH), BRANCH
    assert not BRANCH.startswith("refs/") and not BRANCH.endswith(".lock"), BRANCH


def test_every_colab_link_opens_a_notebook_of_the_repository() -> None:
    """The launch URL that sphinx-book-theme makes for each notebook page of _toc.yml."""
    owner, name = _owner_and_name()
    colab = config()["launch_buttons"]["colab_url"].strip("/")
    assert colab == "https://colab.research.google.com"
    book = REPOSITORY["path_to_book"].strip("/")
    notebooks = notebook_toc_files()
    assert notebooks
    for page in notebooks:
        path = f"{book}/{page}.ipynb" if book else f"{page}.ipynb"
        url = f"{colab}/github/{owner}/{name}/blob/{BRANCH}/{path}"
        parts = urlsplit(url)
        assert (parts.scheme, parts.netloc, parts.query, parts.fragment) == (
            "https",
            "colab.research.google.com",
            "",
            "",
        )
        # nothing to escape, no empty segment: the parts are the repository's path
        assert quote(parts.path) == parts.path and "//" not in parts.path, url
        assert (ROOT / path).is_file(), f"{url} opens {path}, which is not in the repository"


def test_the_forks_command_rewrites_every_file_that_names_the_repository() -> None:
    """The README's sed command for a fork lists every file (README aside) naming the
    repository, so that a fork's buttons, set-up cells and configuration stay one."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git work tree: the repository's files are those git lists")
    section = README.split("## Publishing a copy", 1)[1].split("\n## ", 1)[0]
    (command,) = [line.strip() for line in section.splitlines() if line.strip().startswith("sed")]
    sed, option, _, *patterns = shlex.split(command)
    assert (sed, option) == ("sed", "-i")
    rewritten = {p.relative_to(ROOT).as_posix() for pat in patterns for p in ROOT.glob(pat)}
    owner, name = _owner_and_name()
    naming = {
        path
        for path in TASKS.repository_files()
        if (ROOT / path).is_file() and f"{owner}/{name}".encode() in (ROOT / path).read_bytes()
    }
    assert naming - {"README.md"} <= rewritten, naming - {"README.md"} - rewritten
