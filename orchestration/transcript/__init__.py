"""A run as the model and the pages read it (engine): the step ledger folded
into compact tool rounds and expanded back into provider-neutral messages
(``rounds``), and the messages of an LLM turn (``history``)."""
