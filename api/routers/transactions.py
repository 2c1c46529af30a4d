"""Transactions over HTTP: the Kafka transactional producer's calls, served by the same coordinator as the
Kafka listener's (``lakelog.transaction.transaction_coordinator``).

A transaction begins implicitly with its first write (produce or offsets), as in Kafka's clients:

- ``POST /v1/transactions/{id}/init``                 InitProducerId: producer id and a bumped epoch
- ``POST /v1/transactions/{id}/topics/{topic}/records`` produce (the idempotent JSON form), held until commit
- ``POST /v1/transactions/{id}/offsets``              sendOffsetsToTransaction (AddOffsetsToTxn + TxnOffsetCommit)
- ``POST /v1/transactions/{id}/commit`` / ``/abort``   EndTxn
- ``GET  /v1/transactions/{id}``                       DescribeTransactions

Needs Write on the TransactionalId (Describe for GET), Write on each topic produced to, and Read on the group
and on each topic of the offsets sent.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from lakelog.broker.authorizer import GROUP, TOPIC, TRANSACTIONAL_ID
from lakelog.errors import InvalidRequest, TransactionalIdNotFound
from lakelog.transaction.transaction_coordinator import TransactionCoordinator

from api.deps import AuthorizerDep, PrincipalDep, ProduceDep
from api.schemas import (ProduceResponse, ProducerOut, TransactionInit, TransactionOffsets, TransactionOut,
                         TransactionProducer, error_responses)
from api.produce_request import JSON, ArrowParams

router = APIRouter(prefix="/v1/transactions", tags=["transactions"])


def _coordinator(request: Request) -> TransactionCoordinator:
    return request.app.state.transactions


@router.post("/{transactional_id}/init", response_model=ProducerOut, responses=error_responses(400, 401, 403, 409, 503))
def init(transactional_id: str, request: Request, principal: PrincipalDep, authorizer: AuthorizerDep,
         body: TransactionInit | None = None) -> dict:
    """InitProducerId for a transactional id: its producer id with the epoch bumped, fencing older instances;
    an open transaction of the id is aborted."""
    authorizer.authorize(principal, "Write", TRANSACTIONAL_ID, transactional_id)
    timeout = body.transaction_timeout_ms if body is not None else TransactionInit().transaction_timeout_ms
    ident = _coordinator(request).init_producer_id(transactional_id, timeout)
    return {"producer_id": ident.producer_id, "producer_epoch": ident.producer_epoch,
            "transactional_id": transactional_id}


@router.post("/{transactional_id}/topics/{topic}/records", response_model=ProduceResponse,
             responses=error_responses(400, 401, 403, 404, 409, 413, 503))
async def produce(transactional_id: str, topic: str, request: Request, principal: PrincipalDep,
                  authorizer: AuthorizerDep, service: ProduceDep) -> dict:
    """Records of the open transaction, in the idempotent JSON form (``producer_id``, ``producer_epoch``,
    ``batches`` with ``base_sequence``).  They are held until commit: the response's ``base_offset`` is -1."""
    authorizer.authorize(principal, "Write", TRANSACTIONAL_ID, transactional_id)
    authorizer.authorize(principal, "Write", TOPIC, topic)
    body = await request.body()

    def stage() -> dict:
        prepared = service.prepare(topic, body, JSON, ArrowParams())  # validated as any produce; ids checked
        if not all(b.idempotent for b in prepared.batches):
            raise InvalidRequest("a transactional produce uses the idempotent form: producer_id, producer_epoch "
                                 "and batches with base_sequence")
        results = service.pipeline.stage(transactional_id, topic, prepared.batches, add_partitions=True)
        return {"topic": topic, "results": [
            {"partition": r.partition, "base_offset": -1, "record_count": r.record_count, "log_append_time": -1,
             "timestamp_type": "LogAppendTime" if prepared.log_append_time else "CreateTime", "error_code": 0,
             "duplicate": r.duplicate} for r in results]}

    return await run_in_threadpool(stage)


@router.post("/{transactional_id}/offsets", status_code=204, responses=error_responses(400, 401, 403, 409, 503))
def send_offsets(transactional_id: str, body: TransactionOffsets, request: Request, principal: PrincipalDep,
                 authorizer: AuthorizerDep) -> None:
    """sendOffsetsToTransaction: the group's offsets become committed with the transaction, or never."""
    authorizer.authorize(principal, "Write", TRANSACTIONAL_ID, transactional_id)
    authorizer.authorize(principal, "Read", GROUP, body.group_id)
    for topic in sorted({o.topic for o in body.offsets}):  # as a plain offset commit (Kafka's TxnOffsetCommit)
        authorizer.authorize(principal, "Read", TOPIC, topic)
    coordinator = _coordinator(request)
    coordinator.add_offsets(transactional_id, body.producer_id, body.producer_epoch, body.group_id)
    coordinator.txn_offset_commit(transactional_id, body.producer_id, body.producer_epoch, body.group_id,
                                  [(o.topic, o.partition, o.offset, o.metadata or "") for o in body.offsets])


@router.post("/{transactional_id}/commit", status_code=204, responses=error_responses(400, 401, 403, 409, 503))
def commit(transactional_id: str, body: TransactionProducer, request: Request, principal: PrincipalDep,
           authorizer: AuthorizerDep) -> None:
    """EndTxn(commit): answers once every record and offset of the transaction is committed."""
    authorizer.authorize(principal, "Write", TRANSACTIONAL_ID, transactional_id)
    _coordinator(request).end_txn(transactional_id, body.producer_id, body.producer_epoch, True)


@router.post("/{transactional_id}/abort", status_code=204, responses=error_responses(400, 401, 403, 409, 503))
def abort(transactional_id: str, body: TransactionProducer, request: Request, principal: PrincipalDep,
          authorizer: AuthorizerDep) -> None:
    """EndTxn(abort): nothing of the transaction is ever visible."""
    authorizer.authorize(principal, "Write", TRANSACTIONAL_ID, transactional_id)
    _coordinator(request).end_txn(transactional_id, body.producer_id, body.producer_epoch, False)


@router.get("/{transactional_id}", response_model=TransactionOut, responses=error_responses(401, 403, 404))
def describe(transactional_id: str, request: Request, principal: PrincipalDep, authorizer: AuthorizerDep) -> dict:
    """DescribeTransactions: the id's state."""
    authorizer.authorize(principal, "Describe", TRANSACTIONAL_ID, transactional_id)
    meta = _coordinator(request).describe(transactional_id)
    if meta is None:
        raise TransactionalIdNotFound(f"transactional id {transactional_id!r} was never initialised")
    return {"transactional_id": meta.transactional_id, "producer_id": meta.producer_id,
            "producer_epoch": meta.producer_epoch, "state": meta.state.value,
            "transaction_timeout_ms": meta.timeout_ms,
            "partitions": [{"topic": t, "partition": p} for t, p in sorted(meta.partitions)],
            "groups": sorted(meta.groups)}
