"""The composition root: the services every entry point shares (`services`), built once from
the settings (`build`), with each tenant's runtime (`runtimes`) and the model that answers
(`model_choice`)."""
