import re

from profdata import ROOT


def test_ci_runs_the_readme_test_command():
    blocks = re.findall(r"```bash\n(.*?)\n```", (ROOT / "README.md").read_text(), re.S)
    assert len([b for b in blocks if b.startswith("python3 -m venv")]) == 2
    test_cmd = next(b for b in blocks if "pytest" in b)
    assert test_cmd in (ROOT / ".ci" / "run").read_text()


def test_every_cli_command_is_in_the_readme():
    from profkit.cli import cli

    readme = (ROOT / "README.md").read_text()
    for name in cli.commands:
        assert f"profkit {name}" in readme, name
