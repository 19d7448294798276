"""Periodic upkeep of the console's data (scheduled in settings.CELERY_BEAT_SCHEDULE)."""

from celery import shared_task

from profiles.services import roll_up_recall_events


@shared_task
def roll_up_old_recall_events() -> int:
    """Recall events past `recall_event_retention_days` become daily totals (RecallDaily)."""
    return roll_up_recall_events()
