import dagster as dg

from retrain_assets.machines import advance_many
from retrain_assets.machines.observations import transition_observations
from retrain_assets.machines.training import start_training, training_machine
from retrain_assets_tests.machines.fakes import FakeGpu, MemoryCandidates
from retrain_assets_tests.machines.training_services import SPEC, services

KEY = dg.AssetKey("training_job")


def test_a_move_is_observed_on_the_customers_partition_and_a_wait_in_place_is_not(db, tmp_path):
    gpu, machine = FakeGpu(), training_machine()
    svc = services(tmp_path, gpu, MemoryCandidates())
    start_training(db, "acme", "k1", SPEC)

    first = advance_many(db, machine, ["acme"], svc)
    [moved] = transition_observations(
        KEY, machine, {"acme": "INITIAL"}, first, {"acme": "queued 0/10 rounds"}
    )
    assert moved.asset_key == KEY and moved.partition == "acme"
    shown = {name: value.value for name, value in moved.metadata.items()}
    assert shown == {
        "machine": "training",
        "state": "POLL_JOB",
        "previous_state": "INITIAL",
        "status": "waiting",
        "run_key": "k1",
        "reason": "",
        "visits_left": 99,
        "job_id": "job-1",
        "progress": "queued 0/10 rounds",
    }

    waited = advance_many(db, machine, ["acme"], svc)  # the job still runs: a poll in place
    assert waited["acme"].steps == 1
    assert transition_observations(KEY, machine, {"acme": "POLL_JOB"}, waited) == []
