"""Plan files in the end-to-end tests' Python snippets."""


def ranks_of(entry_ranks):
    """A plan entry's ranks as a list: a JSON array as it is, "0-2,5" expanded."""
    if isinstance(entry_ranks, list):
        return entry_ranks
    out = []
    for part in entry_ranks.split(","):
        lo, _, hi = part.strip().partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out
