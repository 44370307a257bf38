from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0009_step_worker'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='trace_parent',
            field=models.CharField(blank=True, default='', max_length=64),
        ),
    ]
