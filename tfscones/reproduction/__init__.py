"""Reproductions of the papers: what each trains (`plans`), running it, and the report."""
