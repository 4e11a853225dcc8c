import subprocess

import tfscones
from tfscones.training.machine import checkout_state, code_version


def _git(folder, *arguments):
    subprocess.run(["git", "-C", str(folder), *arguments], check=True, capture_output=True)


def test_a_checkout_gives_its_commit_and_whether_tracked_files_changed(tmp_path):
    _git(tmp_path, "init", "--quiet")
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "untracked.txt").write_text("not part of the code\n")
    _git(tmp_path, "add", "a.py")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "a")
    head = subprocess.run(
        ["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    assert checkout_state(tmp_path) == (head, False)
    (tmp_path / "a.py").write_text("x = 2\n")
    assert checkout_state(tmp_path) == (head, True)


def test_a_folder_outside_git_has_no_commit(tmp_path):
    assert checkout_state(tmp_path / "missing") == (None, None)


def test_the_code_version_names_the_package_version():
    version = code_version()
    assert version["tfscones"] == tfscones.__version__
    assert (version["commit"] is None) == (version["modified"] is None)
