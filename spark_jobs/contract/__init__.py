"""A pipeline's data contract as the job applies it: the predicates of its expectations (``predicates``)."""
