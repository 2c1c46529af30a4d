"""Producer ids: ``POST /v1/producers`` (Kafka's InitProducerId)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from lakelog.broker.authorizer import CLUSTER, TRANSACTIONAL_ID

from api.deps import AuthorizerDep, LogDep, PrincipalDep
from api.schemas import ProducerInit, ProducerOut, error_responses

router = APIRouter(prefix="/v1/producers", tags=["producers"])


@router.post("", response_model=ProducerOut, responses=error_responses(400, 401, 403, 503))
def init_producer(log: LogDep, principal: PrincipalDep, authorizer: AuthorizerDep, request: Request,
                  body: ProducerInit | None = None) -> dict:
    """A new producer id (epoch 0), or a transactional id's id with its epoch bumped (fencing the older one).

    Needs IdempotentWrite on the cluster (a transactional id: Write on it; see ``/v1/transactions``).
    """
    tid = body.transactional_id if body is not None else None
    if tid is not None:
        authorizer.authorize(principal, "Write", TRANSACTIONAL_ID, tid)
        ident = request.app.state.transactions.init_producer_id(tid)
    else:
        authorizer.authorize(principal, "IdempotentWrite", CLUSTER)
        ident = log.init_producer(None)
    return {"producer_id": ident.producer_id, "producer_epoch": ident.producer_epoch,
            "transactional_id": ident.transactional_id}
