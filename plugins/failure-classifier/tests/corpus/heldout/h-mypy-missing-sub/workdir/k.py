from kafka_heldout_xyz.consumer import Consumer

Consumer()
