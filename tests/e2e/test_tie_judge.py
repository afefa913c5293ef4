"""judge_greedy_runs (test_llm_ensemble.py) on made-up runs: it decides whether a GPU pause-and-resume run
differs from its reference only by rounding, so it must be checked without a server, where it runs everywhere.
"""
import unittest

from test_llm_ensemble import judge_greedy_runs

IDS = [11, 22, 33, 44, 55, 66]
LPS = [-1.0, -2.0, -0.5, -3.0, -1.5, -2.5]


def judge(got_ids, got_lps, tol):
    return judge_greedy_runs(IDS, LPS, got_ids, got_lps, tol, name="request 3")


class TieJudgeTest(unittest.TestCase):
    def test_identical_runs_pass_at_any_tolerance(self):
        for tol in (0.0, 0.1):
            failure, summary = judge(list(IDS), list(LPS), tol)
            self.assertIsNone(failure)
            self.assertIn("6/6 tokens match, divergence none", summary)

    def test_divergence_at_a_near_tie_passes(self):
        ids = IDS[:3] + [99, 98, 97]
        lps = [-1.02, -1.97, -0.51, -3.05, -7.0, -0.1]  # past the divergence anything goes
        failure, summary = judge(ids, lps, 0.1)
        self.assertIsNone(failure)
        self.assertIn("3/6 tokens match, divergence at 3", summary)
        self.assertIn("0.03", summary)  # the largest drift before the divergence

    def test_divergence_with_a_gap_fails(self):
        failure, _ = judge(IDS[:3] + [99, 55, 66], LPS[:3] + [-2.0] + LPS[4:], 0.1)
        self.assertIsNotNone(failure)
        for part in ("request 3", "position 3", "token 99", "-2.0", "has 44", "-3.0", "tolerance 0.1"):
            self.assertIn(part, failure)

    def test_drift_before_the_divergence_fails(self):
        lps = list(LPS)
        lps[1] += 0.5
        failure, _ = judge(IDS[:4] + [99, 98], lps[:4] + [-1.5, -2.5], 0.1)
        self.assertIsNotNone(failure)
        self.assertIn("position 1", failure)
        self.assertIn("tolerance 0.1", failure)

    def test_drift_without_divergence_fails(self):
        lps = list(LPS)
        lps[5] -= 0.5
        failure, _ = judge(list(IDS), lps, 0.1)
        self.assertIn("position 5", failure)

    def test_tolerance_zero_allows_no_difference(self):
        failure, _ = judge(IDS[:5] + [99], list(LPS), 0.0)  # a divergence at an exact tie
        self.assertIn("position 5", failure)
        self.assertIn("tolerance 0", failure)
        lps = list(LPS)
        lps[2] = -0.5000001
        failure, _ = judge(list(IDS), lps, 0.0)
        self.assertIn("position 2", failure)

    def test_different_lengths_fail(self):
        failure, _ = judge(IDS[:5], LPS[:5], 0.1)
        self.assertIn("5 tokens generated, the reference has 6", failure)
        failure, _ = judge(list(IDS), LPS[:5], 0.1)
        self.assertIn("6 tokens but 5 log-probs", failure)


if __name__ == "__main__":
    unittest.main()
