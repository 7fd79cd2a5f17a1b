"""Statistics over scored benchmark items: the paired unit bootstrap and the gates against the
question-only baseline and the blind twin, shared by the tables and the released twins."""
