"""Shadows the installed jax for the test jax_user_model_without_jax (tests/jax_user_models.cmake): on PYTHONPATH,
`import jax` fails as it does where JAX is not installed."""

raise ModuleNotFoundError("No module named 'jax'", name="jax")
