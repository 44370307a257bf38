"""Language models: the providers and models configured in the admin
(``models``), how a model name is routed to an endpoint and key
(``routing``), the list clients see (``listing``), model validation records
(``validation``), and the adapters that speak each provider's wire format
(``providers``)."""
