"""Fair scheduling across the fleet (docs/scheduling.md, decision 0018):
caps on running steps per user, assistant and tool (``slots``), and per-user
tool quotas and token budgets (``usage``), configured in the admin
(``limits``)."""
