"""examples/kjv_constrained (decoding verse references under a grammar on the trained pair), its
quick form: every method's output parses and the table has a row per method and draft; bad input
as one line on stderr and exit status 2; the plot script draws its figure from the program.

The program is found through SPECDEC_KJV_CONSTRAINED (set by ctest), else build/examples/."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROGRAM = pathlib.Path(os.environ.get("SPECDEC_KJV_CONSTRAINED",
                                      ROOT / "build" / "examples" / "kjv_constrained"))

pytestmark = pytest.mark.skipif(not PROGRAM.is_file(), reason=f"{PROGRAM} is not built")


def run(*arguments):
    return subprocess.run([str(PROGRAM), *arguments], capture_output=True, text=True, timeout=120)


def table(out):
    """{(method, draft): tokens per target call} from the program's table."""
    rows = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 7 and fields[-1].endswith("x") and fields[0] != "method":
            rows[(fields[0], fields[-5])] = float(fields[-4])
    return rows


@pytest.mark.parametrize("temperature", ["0", "1"])
def test_quick_run_parses(temperature):
    done = run("--tokens", "48", "--repeats", "3", "--temperature", temperature)
    assert done.returncode == 0, done.stderr
    assert "every output parses" in done.stdout
    rows = table(done.stdout)
    assert rows[("plain", "-")] == 1.0
    for method in ("sd", "sequoia", "eagle"):
        for draft in ("masked", "unmasked"):
            assert 1.0 <= rows[(method, draft)] <= 6.0
    for line in done.stdout.splitlines():
        if line.startswith("  text: "):
            text = line[len("  text: "):]
            assert text.split()[0] in ("Acts", "Deuteronomy", "Exodus", "Genesis", "Isaiah",
                                       "John", "Joshua", "Judges", "Leviticus", "Luke", "Mark",
                                       "Matthew", "Numbers", "Proverbs", "Psalms", "Romans",
                                       "Ruth")


@pytest.mark.parametrize("arguments, message", [
    (["--methods", "sd,beam"], "--methods: 'beam' is not a method"),
    (["--prompt", "And God said"], "--prompt: 'And God said' does not begin text of the grammar"),
    (["--tokens", "500"], "--tokens: 500 after a prompt of 45 bytes overflows"),
    (["--temperature", "hot"], "--temperature: 'hot' is not a number"),
    (["--repeats"], "--repeats: expects a value"),
    (["--colour", "red"], "--colour: is not an option"),
    (["--models", "/nonexistent"], "kjv_pair.json"),
])
def test_bad_input_is_one_line_and_status_2(arguments, message):
    done = run(*arguments)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("kjv_constrained: ")
    assert message in done.stderr


def test_plot_script_draws_from_the_program(tmp_path):
    pytest.importorskip("matplotlib")
    output = tmp_path / "constrained.png"
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "python" / "plot_constrained.py"),
                           "--program", str(PROGRAM), "--output", str(output),
                           "--temperatures", "1", "--repeats", "2"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert output.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| SD (L=4) | 1 |" in done.stdout
