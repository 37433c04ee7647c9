"""An independent check of netlab's network models: scenarios run packet by packet in ns-3.

* :mod:`.scenario`: what the referee runs (fabric, placed jobs, transport), files, the C++ program's input;
* :mod:`.referee`: building and running ``ns3/referee.cc``;
* :mod:`.predict`: every netlab network model's answer for the same scenario;
* :mod:`.families`: seeded scenario families beyond what the testbed can reach, split into halves;
* :mod:`.compare`: referee against models, side by side and as error summaries.

``README.md`` beside this file says what the referee models and what it does not.
"""
