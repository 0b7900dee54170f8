"""Keeps Python objects of known content alive and prints their addresses as
"name=value" lines, then "ready", for tests/unit/python/asyncio_readers_test.cc:
the object reader must read them back out of this process's memory.
Runs until killed. Not product code."""
import sys
import time
import weakref


class Plain:
    pass


class Target:
    pass


small_dict = {"alpha": "one", "beta": "two", 3: "three"}
big_dict = {f"key{i}": i for i in range(1000)}
del big_dict["key5"]  # a deleted entry must not show
number_set = {10 ** 6 + i for i in range(300)}
number_set.discard(10 ** 6 + 7)  # a dummy entry
items = ["x", "y", "z"]
pair = ("p", "q")
target = Target()
alive = weakref.ref(target)
dead = weakref.ref(Target())
weak_set = weakref.WeakSet([target])
instance = Plain()
instance.first = "first value"
instance.second = "second value"
grown = Plain()  # its __dict__ made real, as vars() does
grown.first = "grown value"
vars(grown)
for i in range(40):
    setattr(grown, f"extra{i}", i)

lines = {
    "small_dict": id(small_dict), "small_dict_alpha": id(small_dict["alpha"]),
    "big_dict": id(big_dict), "big_dict_len": len(big_dict), "big_dict_key999": id(big_dict["key999"]),
    "number_set": id(number_set), "number_set_len": len(number_set),
    "items": id(items), "items_1": id(items[1]),
    "pair": id(pair), "pair_0": id(pair[0]),
    "target": id(target), "alive": id(alive), "dead": id(dead),
    "weak_set": id(weak_set),
    "instance": id(instance), "instance_second": id(instance.second),
    "grown": id(grown), "grown_first": id(grown.first),
    "modules": id(sys.modules), "sys_module": id(sys),
}
for name, value in lines.items():
    print(f"{name}={value}")
print("ready", flush=True)
while True:
    time.sleep(60)
