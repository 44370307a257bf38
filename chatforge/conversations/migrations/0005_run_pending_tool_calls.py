from django.db import migrations, models
from django.db.models import Count, OuterRef, Subquery

FINISHED = ("success", "error", "timeout", "cancelled")


def count_pending_calls(apps, schema_editor):
    """Runs in flight during the upgrade: their current round's unfinished
    calls, so the first fan-in under the counter is still the last call."""
    Run = apps.get_model("conversations", "Run")
    ToolInvocation = apps.get_model("conversations", "ToolInvocation")
    unfinished = (
        ToolInvocation.objects.filter(run=OuterRef("pk"), iteration=OuterRef("iteration"))
        .exclude(status__in=FINISHED)
        .order_by()
        .values("run")
        .annotate(n=Count("pk"))
        .values("n")
    )
    Run.objects.filter(status__in=("queued", "running")).update(
        pending_tool_calls=models.functions.Coalesce(Subquery(unfinished), 0)
    )


class Migration(migrations.Migration):

    dependencies = [
        ("conversations", "0004_run_idempotency_key"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="pending_tool_calls",
            field=models.IntegerField(default=0),
        ),
        migrations.RunPython(count_pending_calls, migrations.RunPython.noop),
    ]
