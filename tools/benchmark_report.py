"""The statistics and outputs of tools/benchmark_core_model.py: the summary table NVIDIA's script prints, the
CSV row (--op-stats-csv), the perfetto trace (--dump-perfetto-trace) and the SVG plot (--plot), from the
client's request records (benchmark_core_model.RequestRecord: index, prompt, start, first_token, end,
output_tokens, error, latency_ms). Python 3's standard library only."""

import csv
import json
import math


def percentile(sorted_values, fraction):
    """Nearest rank: the smallest value with at least `fraction` of the values at or below it (what
    NVIDIA's script computes: sorted[ceil(n * p) - 1])."""
    if not sorted_values:
        return 0.0
    index = max(1, math.ceil(len(sorted_values) * fraction))
    return sorted_values[min(index, len(sorted_values)) - 1]


def compute_stats(records, streaming):
    """The summary table as an ordered list of (name, value), over the successful records."""
    ok = [r for r in records if r.error is None]
    if not ok:
        return []
    latencies = [r.latency_ms for r in ok]
    ordered = sorted(latencies)
    total_s = max(r.end for r in ok) - min(r.start for r in ok)
    total_s = total_s if total_s > 0 else 1e-9
    op_tokens = sum(r.output_tokens for r in ok)
    rows = [
        ("Requests/Sec", len(ok) / total_s),
        ("OP tokens/sec", op_tokens / total_s),
        ("Avg. latency (ms)", sum(latencies) / len(ok)),
        ("P99 latency (ms)", percentile(ordered, 0.99)),
        ("P90 latency (ms)", percentile(ordered, 0.90)),
        ("Avg. IP tokens per request", sum(r.prompt.input_len for r in ok) / len(ok)),
        ("Avg. OP tokens per request", op_tokens / len(ok)),
        # Little's law: the time-average number of requests between send and completion.
        ("Avg. InFlight requests", sum(latencies) / 1000.0 / total_s),
        ("Total latency (ms)", total_s * 1000.0),
        ("Total requests", len(ok)),
    ]
    if streaming:
        ttfts = sorted((r.first_token - r.start) * 1000.0 for r in ok if r.first_token is not None)
        tpots = [(r.end - r.first_token) * 1000.0 / (r.output_tokens - 1)
                 for r in ok if r.first_token is not None and r.output_tokens > 1]
        if ttfts:
            rows += [("Avg. TTFT (ms)", sum(ttfts) / len(ttfts)), ("P50 TTFT (ms)", percentile(ttfts, 0.5)),
                     ("P99 TTFT (ms)", percentile(ttfts, 0.99))]
        if tpots:
            rows.append(("Avg. TPOT (ms)", sum(tpots) / len(tpots)))
    return rows


def format_table(rows):
    """Like tabulate's "pretty" format, as NVIDIA's script prints: centred cells, values to 2 decimals."""
    cells = [("Stat", "Value")] + [(name, f"{value:.2f}") for name, value in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(2)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(cell):
        parts = []
        for text, width in zip(cell, widths):
            left = (width - len(text)) // 2
            parts.append(" " + " " * left + text + " " * (width - len(text) - left) + " ")
        return "|" + "|".join(parts) + "|"

    return "\n".join([rule, line(cells[0]), rule] + [line(c) for c in cells[1:]] + [rule])


# CSV column names of NVIDIA's script (its table says IP/OP, its CSV spells them out).
CSV_NAMES = {"Avg. IP tokens per request": "Avg. Input tokens per request",
             "Avg. OP tokens per request": "Avg. Output tokens per request"}


def append_csv(path, rows):
    fields = {CSV_NAMES.get(name, name): value for name, value in rows}
    with open(path, "a", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(fields))
        if f.tell() == 0:
            writer.writeheader()
        writer.writerow(fields)


def write_perfetto(path, records):
    ok = [r for r in records if r.error is None]
    t0 = min(r.start for r in ok)
    events = [{"name": f"req_{r.index}", "cat": "batch", "ph": "X", "pid": "1",
               "ts": (r.start - t0) * 1e6, "dur": (r.end - r.start) * 1e6,
               "args": {"isl": r.prompt.input_len, "osl": r.output_tokens}} for r in ok]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(events, f, indent=1)


def _nice_ticks(lo, hi, count=5):
    span = hi - lo if hi > lo else 1.0
    step = 10 ** math.floor(math.log10(span / count))
    for mult in (1, 2, 5, 10):
        if span / (step * mult) <= count:
            step *= mult
            break
    first = math.ceil(lo / step) * step
    ticks = []
    value = first
    while value <= hi + step * 1e-9:
        ticks.append(value)
        value += step
    return ticks


def _panel(x0, y0, width, height, x_range, y_range, x_label, y_label, title):
    """SVG of one panel's axes; returns (svg list, x→px, y→px)."""
    (xlo, xhi), (ylo, yhi) = x_range, y_range
    sx = lambda x: x0 + (x - xlo) / ((xhi - xlo) or 1.0) * width  # noqa: E731
    sy = lambda y: y0 + height - (y - ylo) / ((yhi - ylo) or 1.0) * height  # noqa: E731
    out = [f'<rect x="{x0}" y="{y0}" width="{width}" height="{height}" fill="none" stroke="#444"/>',
           f'<text x="{x0 + width / 2}" y="{y0 - 10}" text-anchor="middle" font-size="14">{title}</text>',
           f'<text x="{x0 + width / 2}" y="{y0 + height + 36}" text-anchor="middle">{x_label}</text>',
           f'<text x="{x0 - 52}" y="{y0 + height / 2}" text-anchor="middle" '
           f'transform="rotate(-90 {x0 - 52} {y0 + height / 2})">{y_label}</text>']
    for t in _nice_ticks(xlo, xhi):
        out.append(f'<line x1="{sx(t):.1f}" y1="{y0 + height}" x2="{sx(t):.1f}" y2="{y0 + height + 5}" '
                   'stroke="#444"/>')
        out.append(f'<text x="{sx(t):.1f}" y="{y0 + height + 18}" text-anchor="middle">{t:g}</text>')
    for t in _nice_ticks(ylo, yhi):
        out.append(f'<line x1="{x0}" y1="{sy(t):.1f}" x2="{x0 + width}" y2="{sy(t):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{x0 - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
    return out, sx, sy


def write_plot(path, records, rows):
    """Two panels: each request's latency at its send time, with completed requests per second; and the
    latency histogram with P50/P90/P99 marked."""
    ok = [r for r in records if r.error is None]
    t0 = min(r.start for r in ok)
    starts = [r.start - t0 for r in ok]
    lat = [r.latency_ms for r in ok]
    ordered = sorted(lat)
    t_end = max(r.end for r in ok) - t0
    lat_hi = ordered[-1] * 1.05 or 1.0
    svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="1000" height="440" font-family="sans-serif" '
           'font-size="11">', '<rect width="1000" height="440" fill="white"/>']
    part, sx, sy = _panel(80, 40, 380, 330, (0, t_end or 1.0), (0, lat_hi), "send time (s)",
                          "latency (ms)", "Request latency over time")
    svg += part
    svg += [f'<circle cx="{sx(s):.1f}" cy="{sy(v):.1f}" r="2" fill="#1f77b4" fill-opacity="0.6"/>'
            for s, v in zip(starts, lat)]
    # Completions per second, scaled onto the latency axis, with its own maximum written in the legend.
    seconds = max(1, math.ceil(t_end))
    done = [0] * seconds
    for r in ok:
        done[min(seconds - 1, int(r.end - t0))] += 1
    peak = max(done) or 1
    points = " ".join(f"{sx(i + 0.5):.1f},{sy(c / peak * lat_hi * 0.95):.1f}" for i, c in enumerate(done))
    svg.append(f'<polyline points="{points}" fill="none" stroke="#d62728" stroke-width="1.5"/>')
    svg.append(f'<text x="90" y="58" fill="#d62728">completed requests/s (peak {peak})</text>')
    # Histogram.
    num_bins = max(5, min(40, int(math.sqrt(len(lat))) + 1))
    lo, hi = ordered[0], ordered[-1]
    width = (hi - lo) / num_bins or 1.0
    bins = [0] * num_bins
    for v in lat:
        bins[min(num_bins - 1, int((v - lo) / width))] += 1
    part, hx, hy = _panel(580, 40, 380, 330, (lo, lo + width * num_bins), (0, max(bins) * 1.1),
                          "latency (ms)", "requests", "Latency histogram")
    svg += part
    for i, count in enumerate(bins):
        x_left, x_right = hx(lo + i * width), hx(lo + (i + 1) * width)
        svg.append(f'<rect x="{x_left:.1f}" y="{hy(count):.1f}" width="{max(0.5, x_right - x_left - 1):.1f}" '
                   f'height="{hy(0) - hy(count):.1f}" fill="#1f77b4"/>')
    for name, fraction, color in (("P50", 0.5, "#2ca02c"), ("P90", 0.9, "#ff7f0e"), ("P99", 0.99, "#d62728")):
        x = hx(percentile(ordered, fraction))
        svg.append(f'<line x1="{x:.1f}" y1="40" x2="{x:.1f}" y2="370" stroke="{color}" stroke-dasharray="4 3"/>')
        svg.append(f'<text x="{x + 3:.1f}" y="52" fill="{color}">{name}</text>')
    summary = ", ".join(f"{name} {value:.2f}" for name, value in rows[:3])
    svg.append(f'<text x="80" y="425">{summary}</text>')
    svg.append("</svg>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(svg) + "\n")
