"""What the tests of the `ripple` command share: reading the metrics it serves."""

from __future__ import annotations

import urllib.request


def scrape(url: str) -> dict[str, float]:
    """The samples a Prometheus endpoint serves: `name{labels}` -> value."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples
