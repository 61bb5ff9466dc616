"""reports/overview.py: the first screen's choice — the policy that pays the least time within a share of the
memory, the one that saves the most, and the frontier no other option beats on both."""

from reports.overview import Option, Subject, sentence

BASE = 1000


def subject():
    opts = [
        Option("store-all", 1000, BASE, 0.0),
        Option("uniform:k=2", 500, BASE, 0.10),
        Option("revolve:slots=2", 400, BASE, 0.30),
        Option("bad", 600, BASE, 0.40),
        Option("uniform:k=8", 200, BASE, 0.35),
    ]
    return Subject("tiny", "8 blocks", BASE, 0.01, opts, predicted=False)


def test_option_saved_share():
    assert Option("p", 250, 1000, 0.1).saved == 0.75
    assert Option("p", 250, 0, 0.1).saved == 0.0  # nothing to save against


def test_pick_least_memory_and_frontier():
    s = subject()
    assert s.pick(0.5).policy == "uniform:k=2"  # within 500 bytes: the cheapest in time
    assert s.pick(0.25).policy == "uniform:k=8"
    assert s.pick(0.1) is None
    assert s.least_memory().policy == "uniform:k=8"
    assert [o.policy for o in s.frontier()] == ["store-all", "uniform:k=2", "revolve:slots=2", "uniform:k=8"]


def test_sentence_names_both_choices():
    text = sentence(subject())
    assert text.startswith("uniform:k=2 saves 50% of activation memory for +10% step time")
    assert "uniform:k=8 saves the most, 80%, for +35%" in text
    empty = Subject("x", "", BASE, 0.0, [], predicted=True)
    assert sentence(empty) == "No policy to compare."
