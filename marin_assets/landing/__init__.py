"""The landing zone of data drops (``zone``, no Dagster), its Dagster sensor (``sensor``) and the
sample corpus written as drops (``sample_data``). Marin has no landing zone: this is ours."""
