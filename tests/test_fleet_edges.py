"""`fleet.edges`: where a job known from its label alone starts and stops inside a scrape interval, worked by hand.

A GPU scraped every 30 s draws 100 W, a job takes it from 75 s to 165 s at 300 W: its labelled samples are at 90,
120 and 150 s. The counter reads 12,000 J at 90 s and 30,000 J at 150 s (60 s at 300 W), 6,000 J at 60 s before
it and 36,000 J at 180 s after it, so the intervals around the job hold 6,000 J each: 15 s at 100 W and 15 s at
300 W, the step at 75 s (7,500 J) and at 165 s (34,500 J).
"""

from __future__ import annotations

import numpy as np

from footprint.fleet.edges import curve_edges

T = np.array([0.0, 30, 60, 90, 120, 150, 180, 210])
E = np.array([0.0, 3000, 6000, 12000, 21000, 30000, 36000, 39000])


def test_a_step_of_power_is_placed_where_the_interval_holds_the_energy_read() -> None:
    x = curve_edges(T, E, np.array([90.0]), np.array([150.0]), 30.0)
    assert x.start_ok.tolist() == [True] and x.end_ok.tolist() == [True]
    assert (x.start[0], x.start_e[0]) == (75.0, 7500.0)
    assert (x.end[0], x.end_e[0]) == (165.0, 34500.0)


def test_no_edge_where_the_power_does_not_step_nor_for_a_span_shorter_than_a_scrape() -> None:
    flat = 100.0 * T  # 100 W throughout: the job's power is the power before and after it
    spans = (np.array([90.0, 120.0]), np.array([150.0, 120.0]))  # a job of three samples, a job of one
    x = curve_edges(T, flat, *spans, 30.0)
    assert x.start_ok.tolist() == [False, False] and x.end_ok.tolist() == [False, False]
    assert x.start.tolist() == [75.0, 105.0] and x.end.tolist() == [165.0, 135.0]  # half a scrape out
    one = curve_edges(T, E, *spans, 30.0)  # the stepped curve: the one-sample job still has no edge
    assert one.start_ok.tolist() == [True, False] and one.end.tolist()[1] == 135.0
    alike = np.array([0.0, 3000, 6000, 9075, 12225, 15375, 18450, 21450])  # the job at 105 W: within 20 % of 100 W
    x = curve_edges(T, alike, np.array([90.0]), np.array([150.0]), 30.0)
    assert not x.start_ok.any() and not x.end_ok.any() and (x.start[0], x.end[0]) == (75.0, 165.0)


def test_no_edge_across_a_gap_or_at_the_ends_of_the_curve() -> None:
    """The sample before the first labelled one more than 1.5 scrapes earlier (a gap), or no interval before it (the
    curve's first samples): the edge stays half a scrape out. A curve of two knots has none."""
    gap_t, gap_e = np.delete(T, 2), np.delete(E, 2)  # no sample at 60 s: 90 - 30 = 60 s > 45 s
    x = curve_edges(gap_t, gap_e, np.array([90.0]), np.array([150.0]), 30.0)
    assert x.start_ok.tolist() == [False] and x.start.tolist() == [75.0] and x.end_ok.tolist() == [True]
    x = curve_edges(T, E, np.array([30.0]), np.array([180.0]), 30.0)  # one sample before 30 s; two after 180 s
    assert x.start_ok.tolist() == [False] and x.end_ok.tolist() == [False]
    x = curve_edges(T[:2], E[:2], np.array([0.0]), np.array([30.0]), 30.0)
    assert x.start.tolist() == [-15.0] and x.end.tolist() == [45.0] and not x.start_ok.any()
