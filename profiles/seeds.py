"""The rows ovsite ships with: built-in purposes (RFC §3.5) and the settings row. Used by a data migration."""

# The RFC's initial ratios; unevaluated, which is why they are operator-editable.
BUILTIN_PROFILES = {
    "chat": {
        "quotas": {"events": 10, "entities": 8, "preferences": 4, "experiences": 1, "resources": 1, "skills": 2},
        "events_budget_ratio": 0.75,
    },
    "coding": {
        "quotas": {"events": 4, "entities": 6, "preferences": 2, "experiences": 4, "resources": 8, "skills": 6},
        "events_budget_ratio": 0.40,
    },
}


def seed_rows(purpose_profile_model, retrieval_settings_model) -> None:
    for name, values in BUILTIN_PROFILES.items():
        purpose_profile_model.objects.get_or_create(name=name, defaults={**values, "builtin": True})
    retrieval_settings_model.objects.get_or_create(pk=1)
