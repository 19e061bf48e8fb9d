"""Registry formats: Avro, Protobuf and JSON Schema values in the Confluent wire format, decoded into
the columns of a subject's schema (``wire``), each format's type mapping in its own module
(``avro``, ``protobuf``, ``json_schema``), and how a table follows a subject's evolution
(``evolution``). Runs on the driver (resolving the subject) and the executors (decoding)."""


class UnsupportedSchema(ValueError):
    """A schema (of any of the formats) Inlet cannot map to columns; the message names the part."""
