"""The pipeline's one user-facing error: printed as one line by `txn-exporter pipeline`."""


class PipelineError(Exception):
    pass
