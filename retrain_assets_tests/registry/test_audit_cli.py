"""`retrain-assets audit` against a server that is not there: a prompt, clear refusal."""

from retrain_assets.cli import main
from retrain_assets_tests.support.processes import free_port


def test_an_unreachable_registry_is_named_with_exit_code_2(monkeypatch, capsys):
    # restored after the test: the command lowers MLflow's retries for itself
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    uri = f"http://127.0.0.1:{free_port()}"
    assert main(["audit", "--tracking-uri", uri]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"retrain-assets audit: cannot read the MLflow registry at {uri}: ")
    assert "Connection refused" in error


def test_a_customer_name_that_could_break_the_filter_is_refused(monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    uri = f"http://127.0.0.1:{free_port()}"  # never asked: the name is refused before
    assert main(["audit", "--tracking-uri", uri, "--customer", "acme' OR '1"]) == 2
    # the customer name rule refuses it before any filter is built (the quote guard is behind)
    # and before the registry is read (an unreachable one would be named instead)
    error = capsys.readouterr().err
    assert "is not a safe slug" in error and "cannot read the MLflow registry" not in error
