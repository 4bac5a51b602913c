import asyncio, uuid, pytest
from tests.orchestrator.test_command_contracts import *

@pytest.mark.parametrize("edge", COMMANDS[:1], ids=lambda e: e.endpoint.subject)
async def test_exp(gateway_broker, core, nc, js, edge):
    durable = durable_name(edge.endpoint)
    [letter] = await dead_letters(nc, js, edge.endpoint, [b"{not json"])
    print("LETTER", letter)
    for i in range(14):
        info = await js.consumer_info(COMMANDS_STREAM, durable)
        print(i, info.num_pending, info.num_ack_pending, info.num_redelivered, info.delivered, info.ack_floor)
        await asyncio.sleep(1)
