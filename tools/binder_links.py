"""The Binder links in README.md come from one setting: binder/repository, one line, ``owner/name`` on GitHub.

    python tools/binder_links.py                 rewrite README.md's Binder links from binder/repository
    python tools/binder_links.py --from-remote   first set binder/repository from `git remote get-url origin`

(`make binder-links` runs the second form.) tests/test_packaging.py checks that every link agrees with the setting.
"""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETTING = ROOT / "binder" / "repository"
README = ROOT / "README.md"
BINDER_URL = re.compile(r"https://mybinder\.org/v2/gh/([^/\s)]+/[^/\s)]+)/HEAD")
GITHUB_REMOTE = re.compile(r"github\.com[:/]([^/\s]+/[^/\s]+?)(?:\.git)?/?$")


def repository() -> str:
    return SETTING.read_text().strip()


def repository_from_remote(root: Path = ROOT) -> str:
    remote = subprocess.run(["git", "-C", str(root), "remote", "get-url", "origin"], capture_output=True, text=True)
    found = GITHUB_REMOTE.search(remote.stdout.strip())
    if remote.returncode or not found:
        raise SystemExit(f"no GitHub remote named origin ({remote.stdout.strip() or remote.stderr.strip()}): "
                         f"write owner/name into {SETTING.relative_to(ROOT)} yourself")
    return found.group(1)


def with_links(text: str, repo: str) -> str:
    return BINDER_URL.sub(f"https://mybinder.org/v2/gh/{repo}/HEAD", text)


def main(arguments: list[str]) -> None:
    if "--from-remote" in arguments:
        SETTING.write_text(repository_from_remote() + "\n")
    repo = repository()
    README.write_text(with_links(README.read_text(), repo))
    print(f"README.md's Binder links now open {repo}")


if __name__ == "__main__":
    main(sys.argv[1:])
