from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0010_run_trace_parent'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='error_kind',
            field=models.CharField(blank=True, default='', max_length=32),
        ),
    ]
