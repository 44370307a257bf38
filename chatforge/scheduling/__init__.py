"""Fair scheduling across the fleet (docs/scheduling.md, decision 0018):
caps on running steps per user, assistant and tool (``slots``), per-user tool
quotas and token budgets (``usage``), and the limits configured in the admin
(``models``, read through a short cache by ``limits``)."""
