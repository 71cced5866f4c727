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


def test_a_customer_name_that_could_break_the_filter_is_refused(mlflow_uri, capsys):
    assert main(["audit", "--tracking-uri", mlflow_uri, "--customer", "acme' OR '1"]) == 2
    # the customer name rule refuses it before any filter is built (the quote guard is behind)
    assert "is not a safe slug" in capsys.readouterr().err
