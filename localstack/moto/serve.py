"""Run moto's server (the S3 + DynamoDB emulator) with two fixes to its DynamoDB.

Usage: serve.py [moto_server arguments], e.g. serve.py -H 127.0.0.1 -p 4566.
localstack/moto.sh runs it with the python of the moto venv.

moto 5.2.5's DynamoDB has two flaws that matter to Sluice and none to the API it
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
   little; S3 requests are not serialized.

The replacement is written against moto 5.2.5's internals, so any other version is
refused rather than patched blindly. TestIntegrationDynamoDBTransactions
(pkg/catalog/dynamodb) checks the transaction semantics on the running endpoint.
"""

import copy
import sys
import threading

import moto

PATCHED_FOR = "5.2.5"


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
    from moto.dynamodb.responses import DynamoHandler

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

    lock = threading.Lock()
    call_action = DynamoHandler.call_action

    def serialized_call_action(self):
        with lock:
            return call_action(self)

    DynamoHandler.call_action = serialized_call_action


def main():
    if moto.__version__ != PATCHED_FOR:
        sys.exit(f"serve.py: written for moto {PATCHED_FOR}, found {moto.__version__}; "
                 "check its DynamoDB fixes against that version, then update PATCHED_FOR")
    _install()
    from moto.server import main as moto_main

    moto_main(sys.argv[1:])


if __name__ == "__main__":
    main()
