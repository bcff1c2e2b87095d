"""The reduced shape table (examples/python/shape_table.py --quick) on the trained pair: every
lossless policy writes the target's greedy text at temperature 0, and the table and plot come
out with the best of each column marked."""

import pytest

from conftest import requires_torch

pytestmark = requires_torch


@pytest.fixture(scope="module")
def quick_table(tmp_path_factory):
    pytest.importorskip("matplotlib")
    from shape_table import main

    out = tmp_path_factory.mktemp("shape_table")
    results, costs = main(["--quick", "--markdown", str(out / "table.md"),
                           "--plot", str(out / "shapes.png")])
    return results, costs, out


def test_lossless_policies_write_the_greedy_text_at_temperature_0(quick_table):
    results, _, _ = quick_table
    rows = {row["name"]: row for row in results[0]}
    reference = rows["autoregressive"]["outputs"]
    lossless = [row for row in results[0] if row["lossless"]]
    assert len(lossless) >= 12
    for row in lossless:
        assert row["outputs"] == reference, row["name"]


def test_every_policy_emits_at_least_one_token_per_target_call(quick_table):
    results, _, _ = quick_table
    for rows in results.values():
        for row in rows:
            assert row["efficiency"] >= 1.0 and row["seconds"] > 0, row["name"]
    sequoia = next(r for r in results[0] if r["name"] == "Sequoia budget 14")
    assert sequoia["efficiency"] > 1.5  # a trained pair's tree gains over plain decoding


def test_costs_grow_with_the_tree(quick_table):
    _, costs, _ = quick_table
    assert (costs.verify[1:] >= costs.verify[:-1]).all()
    assert costs.verify[-1] >= costs.verify[0] > 0


def test_table_and_plot_are_written(quick_table):
    _, _, out = quick_table
    table = (out / "table.md").read_text()
    assert "| chain | chain k = 4 |" in table and "Sequoia hardware-aware" in table
    assert table.count("**") >= 8  # a best value in each of the four columns
    assert "target ppl" in table
    assert (out / "shapes.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
