"""Run moto's server (the S3 + DynamoDB emulator) with four fixes to its DynamoDB.

Usage: serve.py [moto_server arguments], e.g. serve.py -H 127.0.0.1 -p 4566.
localstack/moto.sh runs it with the python of the moto venv.

moto 5.2.5's DynamoDB has four flaws that matter to Sluice and none to the API it
emulates, so this launcher replaces them before the server starts:

1. TransactWriteItems backed itself up by deep-copying the whole table once per item of
   the transaction, to restore it if the transaction failed. A transaction therefore cost
   O(items in the transaction x items in the table): 0.2 s for one item and 1.1 s for three
   once the table held 8,000 items. The catalog's partition takeover takes three
   transactions, so 1,024 partitions (bench S4) never got their writers within minutes.
   Here a transaction keeps an undo log instead: the prior state of each item it writes,
   restored in reverse order if the transaction is cancelled. The outcome is the same -
   all writes or none, the same cancellation reasons in the same order, the same
   exceptions - at a cost that does not grow with the table.

2. The server is threaded but the backend is not safe for concurrent use: a query
   iterating a table while another request inserted failed with HTTP 500 "dictionary
   changed size during iteration". DynamoDB requests are served one at a time here
   (a lock around each action). Python runs one thread at a time anyway, so this costs
   little; S3 requests are not serialized. Every REPORT_EVERY seconds with traffic, one log
   line sums up the calls served and the time they took.

3. Query found its hash key's items by sorting every item of the table and comparing each
   one's hash key: 174 ms per Query once bench S4 had grown the table, and Sluice lists
   partitions with Query. A table query now looks at its hash key's items only (they are
   sorted by range key after, as before). Queries on indexes are unchanged.

4. Query and Scan answers went through moto's generic response serializer, which walks
   the API's shape model for every attribute of every item: about 0.6 ms per partition
   item, so listing 1,024 partitions took 0.6-0.9 s (and ingest lists them every
   balancing round). Those two answers are now written as JSON directly, in the same wire
   form (binary attributes base64-encoded).

The replacement is written against moto 5.2.5's internals, so any other version is
refused rather than patched blindly. pkg/catalog/dynamodb's emulator_integration_test.go
checks the semantics of all four on the running endpoint.
"""

import base64
import copy
import json
import sys
import threading
import time

import moto

PATCHED_FOR = "5.2.5"
# REPORT_EVERY: seconds between the log lines that sum up the DynamoDB calls served.
REPORT_EVERY = 30.0


def _install():
    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.exceptions import (
        ConditionalCheckFailed,
        MockValidationException,
        MultipleTransactionsException,
        TooManyTransactionsException,
        TransactionCanceledException,
        TransactWriteSingleOpException,
    )
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table
    from moto.core.responses import ActionResult
    from moto.dynamodb.responses import DynamoHandler, DynamoResult

    kinds = ("ConditionCheck", "Put", "Delete", "Update")

    def restore(table, hash_key, range_key, before):
        """Put an item back the way it was before the transaction wrote it."""
        if range_key is None:
            if before is None:
                table.items.pop(hash_key, None)
            else:
                table.items[hash_key] = before
        elif before is None:
            table.items[hash_key].pop(range_key, None)
        else:
            table.items[hash_key][range_key] = before

    def run_one(backend, kind, op, targets, undo):
        """Check and apply one action. Returns its cancellation reason as
        (code, message, item), (None, None, None) on success; raises for the
        errors that fail the whole request instead of cancelling it."""
        old = None
        try:
            if kind not in kinds:
                raise ValueError("Unsupported transaction operation")
            name = op["TableName"]
            names = op.get("ExpressionAttributeNames")
            values = op.get("ExpressionAttributeValues")
            condition = op.get("ConditionExpression")
            if kind == "Put":
                table = backend.get_table(name)
                key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = op["Item"][table.range_key_attr]
            else:
                key = op["Key"]
            target = (str(name), str(dict(sorted(key.items()))))
            if target in targets:
                raise MultipleTransactionsException()
            targets.add(target)

            current = backend.get_item(name, key)
            if condition is not None and not get_filter_expression(condition, names, values).expr(current):
                if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
                    old = current.to_json()["Attributes"]
                raise ConditionalCheckFailed(item=old)
            if kind == "ConditionCheck":
                return (None, None, None)

            table = backend.get_table(name)
            hash_key, range_key = backend.get_keys_value(table, key)
            # Updates change the stored item in place: keep a copy of this one item.
            undo.append((table, hash_key, range_key, copy.deepcopy(current)))
            if kind == "Put":
                backend.put_item(name, op["Item"], condition_expression=condition,
                                 expression_attribute_names=names, expression_attribute_values=values)
            elif kind == "Delete":
                backend.delete_item(name, key, condition_expression=condition,
                                    expression_attribute_names=names, expression_attribute_values=values)
            else:
                backend.update_item(name, key, update_expression=op["UpdateExpression"],
                                    condition_expression=condition,
                                    expression_attribute_names=names, expression_attribute_values=values)
            return (None, None, None)
        except (MultipleTransactionsException, MockValidationException):
            raise
        except ConditionalCheckFailed as e:
            return ("ConditionalCheckFailed", str(e.message), old)
        except Exception as e:  # any other failure cancels the transaction with its name
            return (type(e).__name__, str(e), old)

    def transact_write_items(self, transact_items):
        if len(transact_items) > 100:
            raise TooManyTransactionsException()
        targets, undo, reasons = set(), [], []

        def rollback():
            for entry in reversed(undo):
                restore(*entry)

        try:
            for entry in transact_items:
                if len(entry) > 1:
                    raise TransactWriteSingleOpException
                kind, op = next(iter(entry.items()))
                reasons.append(run_one(self, kind, op, targets, undo))
        except BaseException:
            rollback()
            raise
        if any(code is not None for code, _, _ in reasons):
            rollback()
            raise TransactionCanceledException(reasons)

    DynamoDBBackend.transact_write_items = transact_write_items

    # Query: only the queried hash key's items are candidates (see fix 3).
    scope = [None]  # (table, hash key) while a table (not index) query runs
    all_items = Table.all_items
    query = Table.query

    def scoped_all_items(self):
        if scope[0] is not None and scope[0][0] is self and self.range_key_attr:
            return list(self.items.get(scope[0][1], {}).values())
        return all_items(self)

    def scoped_query(self, hash_key, range_comparison, range_objs, limit, exclusive_start_key,
                     scan_index_forward, projection_expressions, index_name=None, *args, **kwargs):
        if index_name is None and hash_key is not None:
            scope[0] = (self, hash_key)
        try:
            return query(self, hash_key, range_comparison, range_objs, limit, exclusive_start_key,
                         scan_index_forward, projection_expressions, index_name, *args, **kwargs)
        finally:
            scope[0] = None

    Table.all_items = scoped_all_items
    Table.query = scoped_query

    # Query and Scan answers: plain JSON (see fix 4).
    class JSONResult(ActionResult):
        def execute_result(self, context):
            body = json.dumps(self.result, default=wire_value, separators=(",", ":"))
            return 200, {"Content-Type": "application/x-amz-json-1.0"}, body

    def wire_value(value):
        """JSON for what dynamo_to_dict leaves as Python objects: binary
        attributes (raw bytes) go base64-encoded, as on the wire."""
        if isinstance(value, bytes):
            return base64.b64encode(value).decode("ascii")
        raise TypeError(f"serve.py: no JSON form for {type(value).__name__} in a Query or Scan answer")

    for action in ("query", "scan"):
        def plain_json(self, answer=getattr(DynamoHandler, action)):
            result = answer(self)
            return JSONResult(result.result) if type(result) is DynamoResult else result

        setattr(DynamoHandler, action, plain_json)

    lock = threading.Lock()
    call_action = DynamoHandler.call_action
    stats = {}  # action -> [calls, seconds], since the last report
    last_report = [time.monotonic()]

    def serialized_call_action(self):
        with lock:
            start = time.monotonic()
            try:
                return call_action(self)
            finally:
                now = time.monotonic()
                entry = stats.setdefault(described(self._get_action(), getattr(self, "body", None)), [0, 0.0])
                entry[0] += 1
                entry[1] += now - start
                if now - last_report[0] >= REPORT_EVERY:
                    report(stats, now - last_report[0])
                    stats.clear()
                    last_report[0] = now

    DynamoHandler.call_action = serialized_call_action


def described(action, body):
    """The action, with the kind of item it read when Sluice's catalog key says so: the
    partition key's prefix up to '#' ("GetItem partitions", "Query ledgers-by-state")."""
    if action not in ("GetItem", "Query") or not isinstance(body, dict):
        return action
    try:
        if action == "GetItem":
            pk = body["Key"]["pk"]["S"]
        else:
            pk = body["ExpressionAttributeValues"][":pk"]["S"]
    except (KeyError, TypeError):
        return action
    return f"{action} {pk.split('#', 1)[0]}"


def report(stats, window):
    """One log line per REPORT_EVERY: which DynamoDB calls the emulator served and how
    much of the window each took (what to look at when the catalog is slow in a bench)."""
    busy = sum(sec for _, sec in stats.values())
    parts = ", ".join(f"{action} {calls} ({sec * 1000 / calls:.1f} ms avg)"
                      for action, (calls, sec) in sorted(stats.items(), key=lambda kv: -kv[1][1]))
    print(f"serve.py: DynamoDB busy {100 * busy / window:.0f}% of the last {window:.0f}s: {parts}",
          file=sys.stderr, flush=True)


def main():
    if moto.__version__ != PATCHED_FOR:
        sys.exit(f"serve.py: written for moto {PATCHED_FOR}, found {moto.__version__}; "
                 "check its DynamoDB fixes against that version, then update PATCHED_FOR")
    _install()
    from moto.server import main as moto_main

    moto_main(sys.argv[1:])


if __name__ == "__main__":
    main()
