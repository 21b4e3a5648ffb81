"""Job control's core: the lifecycle state machine (lifecycle), the failure catalogue and
how an ended attempt is classified into it (failures), and cost over all attempts at a
device profile's rate (cost). Submit, the queue and the workers build on these."""
