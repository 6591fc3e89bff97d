import json

from click.testing import CliRunner

from tracekit.cli import cli


def _run(*args):
    return CliRunner().invoke(cli, ["memory", "model", *args])


def test_json_matches_table2_gpt3_tp8():
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    res = _run("--seq", s, "--batch", b, "--hidden", h, "--heads", a, "--tp", t, "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["model"]["paper_bytes"] == s * b * h * (10 + 24 / t + 5 * a * s / (h * t))
    assert doc["model"]["formula"] == "sbh(10 + 24/t + 5as/(ht))"


def test_table_lists_terms_and_tensors():
    res = _run(
        "--seq",
        "64",
        "--batch",
        "2",
        "--hidden",
        "128",
        "--heads",
        "8",
        "--tp",
        "2",
        "--sp",
        "--recompute",
        "selective",
        "--tensors",
        "--vocab",
        "1000",
    )
    assert res.exit_code == 0, res.output
    assert "sbh(34/t)" in res.output and "GELU input" in res.output and "logits" in res.output
    assert "softmax" not in res.output  # selective recomputation drops the s² terms


def test_bad_shape_is_a_usage_error():
    res = _run("--seq", "64", "--batch", "2", "--hidden", "100", "--heads", "8")
    assert res.exit_code == 2 and "not a multiple of heads" in res.output
