#!/usr/bin/env bash
# Sends the gate a signed Razorpay `payment.captured` event for one order, as
# Razorpay would after the customer paid it: for the demo provider, which
# takes no money itself, and for trying the webhook route by hand.
#
#   scripts/send-webhook.sh ORDER_ID AMOUNT_PAISE [CURRENCY]
#
# Reads SPENDGATE_WEBHOOK_SECRET (the gate's webhook secret) and SPENDGATE_URL
# (default http://127.0.0.1:8080). Prints the gate's answer; exits 0 when the
# gate accepted the event (HTTP 2xx), 1 otherwise, 2 on bad arguments.
# Needs bash, openssl and curl.
set -euo pipefail

usage() { echo "usage: $0 ORDER_ID AMOUNT_PAISE [CURRENCY]" >&2; exit 2; }
[ $# -ge 2 ] && [ $# -le 3 ] || usage
order=$1
amount=$2
currency=${3:-INR}
[[ "$order" =~ ^[A-Za-z0-9_]{1,64}$ ]] || { echo "ORDER_ID must be an order id such as order_Abc123" >&2; exit 2; }
[[ "$amount" =~ ^[1-9][0-9]{0,17}$ ]] || { echo "AMOUNT_PAISE must be a positive whole number of paise" >&2; exit 2; }
[[ "$currency" =~ ^[A-Z]{3}$ ]] || { echo "CURRENCY must be a three-letter code such as INR" >&2; exit 2; }
secret=${SPENDGATE_WEBHOOK_SECRET:?set SPENDGATE_WEBHOOK_SECRET to the gate\'s webhook secret}
url=${SPENDGATE_URL:-http://127.0.0.1:8080}

now=$(date +%s)
payment="pay_$(openssl rand -hex 7)"
event="evt_$(openssl rand -hex 8)"
body=$(printf '{"entity":"event","account_id":"acc_demo","event":"payment.captured","contains":["payment"],"payload":{"payment":{"entity":{"id":"%s","entity":"payment","amount":%s,"currency":"%s","status":"captured","order_id":"%s","method":"upi","captured":true,"created_at":%s}}},"created_at":%s}' \
  "$payment" "$amount" "$currency" "$order" "$now" "$now")
signature=$(printf '%s' "$body" | openssl dgst -sha256 -hmac "$secret" -r | cut -d' ' -f1)

answer=$(curl -sS -w '\n%{http_code}' -X POST "$url/webhooks/razorpay" \
  -H 'content-type: application/json' \
  -H "x-razorpay-signature: $signature" \
  -H "x-razorpay-event-id: $event" \
  --data-binary "$body")
status=${answer##*$'\n'}
echo "${answer%$'\n'*}"
case $status in
  2??) echo "captured: $payment for order $order ($amount $currency)" >&2; exit 0 ;;
  *) echo "the gate answered HTTP $status" >&2; exit 1 ;;
esac
