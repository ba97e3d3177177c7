"""Spearman's rank correlation, ties sharing their mean rank: how well a prediction orders
measured rows (bench/plan_heads_bench.py, bench/plan_published.py)."""


def ranks_of(values):
    """Ranks from 0, ties sharing their mean rank (equal predictions rank as one)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    r = [0.0] * len(values)
    k = 0
    while k < len(order):
        e = k
        while e + 1 < len(order) and values[order[e + 1]] == values[order[k]]:
            e += 1
        for j in range(k, e + 1):
            r[order[j]] = (k + e) / 2.0
        k = e + 1
    return r


def spearman(a, b):
    ra, rb = ranks_of(a), ranks_of(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb) if va > 0 and vb > 0 else float("nan")
