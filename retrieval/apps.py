from django.apps import AppConfig
from django.db.models.signals import post_save


class RetrievalConfig(AppConfig):
    name = "retrieval"

    def ready(self):
        # The operator changes the tokenizer family in the admin, which saves the row itself: there is no service
        # call to hook, so the stored counts follow the change through the row's save signals.
        from profiles.models import RetrievalSettings
        from retrieval.recount import recount_if_stale

        post_save.connect(recount_if_stale, sender=RetrievalSettings, dispatch_uid="retrieval.recount")
