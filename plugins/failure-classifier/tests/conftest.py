"""The corpus holds real projects with deliberately failing tests: never collect them."""

collect_ignore = ["corpus"]
