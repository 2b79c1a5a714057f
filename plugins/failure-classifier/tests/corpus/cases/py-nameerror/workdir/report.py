def render(rows):
    return "\n".join(fmt(r) for r in rows)
